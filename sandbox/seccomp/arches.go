package seccomp

// arch is what the program needs to know of a machine arch.
type arch struct {
	audit uint32 // AUDIT_ARCH_* of the native ABI
	// x32 is set where another ABI (x86_64's x32) shares the native audit
	// value and marks its syscall numbers with x32Bit instead.
	x32 bool
	// profile is the arch's name in Docker's profile (libseccomp's).
	profile string
}

var arches = map[string]arch{
	"amd64": {audit: 0xc000003e, x32: true, profile: "amd64"},
	"arm64": {audit: 0xc00000b7, profile: "arm64"},
}
