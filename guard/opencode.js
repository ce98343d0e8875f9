// cco guard for OpenCode. Installed by cco-install and listed in its managed
// /etc/opencode/opencode.json; `cco-install status` reports any change to
// either. OpenCode only logs a plugin that fails to load, so this file is
// kept small and plain.
//
// A new session runs the SessionStart verifier; every prompt runs the
// UserPromptSubmit gate first (chat.message), and a block throws: OpenCode
// aborts the request on a hook that throws. Anything but the gate's own
// exit 0 blocks too.
import { spawnSync } from "node:child_process";

const agent = "opencode";
const dir = "/usr/libexec/cco/guard";

function run(hook, input) {
  return spawnSync(dir + "/" + hook, [agent], {
    input: JSON.stringify(input),
    encoding: "utf8",
    timeout: 20000,
  });
}

// The guard answers with nothing or one JSON object with a systemMessage.
function systemMessage(out) {
  try {
    return JSON.parse(out || "{}").systemMessage || "";
  } catch {
    return "";
  }
}

function textOf(parts) {
  return (parts || [])
    .filter((p) => p && p.type === "text" && typeof p.text === "string")
    .map((p) => p.text)
    .join("\n");
}

export const CcoGuard = async ({ client, directory }) => {
  const tell = async (message) => {
    process.stderr.write(message + "\n");
    try {
      await client.app.log({ body: { service: "cco-guard", level: "warn", message } });
    } catch {}
  };
  return {
    event: async ({ event }) => {
      if (!event || event.type !== "session.created") return;
      const id = (event.properties && event.properties.info && event.properties.info.id) || "";
      const r = run("session-start", { session_id: id, hook_event_name: "SessionStart", cwd: directory, source: "startup" });
      const msg = systemMessage(r.stdout);
      if (msg) await tell(msg);
    },
    "chat.message": async (input, output) => {
      const r = run("prompt-gate", {
        session_id: (input && input.sessionID) || "",
        hook_event_name: "UserPromptSubmit",
        cwd: directory,
        prompt: textOf(output && output.parts),
      });
      if (r.error || r.status !== 0) {
        let why = (r.stderr || "").trim();
        if (!why) why = "cco guard: the gate failed (" + (r.error ? r.error.message : "exit " + r.status) + "), so this prompt is blocked: run 'sudo cco-install status'";
        process.stderr.write(why + "\n");
        throw new Error(why);
      }
      const msg = systemMessage(r.stdout);
      if (msg) await tell(msg);
    },
  };
};
