package sandbox

// ConfigPath is the jail's configuration on the target system. It is
// root-owned and never read from the workspace.
const ConfigPath = "/etc/cco/sandbox.toml"

// DefaultConfigTOML is the sandbox.toml that cco-install puts in place when
// none exists. Every key is shown with its default, commented out.
const DefaultConfigTOML = `# cco sandbox configuration. Root-owned; read by the shadow at every launch.
# Never read from the workspace. Every key below shows its default.

# The directory bound read-write. Empty: the current directory. When set, it
# must contain the current directory.
# workspace_root = ""

# Extra absolute paths bound read-write into every jail.
# allow_write = []

# Names of environment variables passed into the jail (PATH, HOME, USER,
# LD_*, BASH_ENV, ENV, IFS and CCO_* are refused).
# pass_env = []

# Forge CLIs whose token directory is bound in (for example ["github"]).
# forge = []

# Give claude --dangerously-skip-permissions (the jail is the boundary).
# claude_skip_permissions = false
`
