"""opencode: a plugin of ours, named in a per-session config file (OPENCODE_CONFIG, merged with the user's own
config; OPENCODE_CONFIG_DIR when the user already points OPENCODE_CONFIG somewhere). The plugin turns
`session.status` (busy / idle), `session.idle` and permission events into signals, and appends each assistant
message's tokens and cost from `message.updated` events to a usage file in the session's TMPDIR (writable inside a
sandbox, where the session dir is read-only): opencode keeps its own
records in a SQLite database whose schema changes between versions, its plugin events are its stable interface.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from daintree_tui.sessions.agents.base import AgentIntegration, SessionContext, Wiring, write_private

USAGE_FILE = "opencode-usage.jsonl"

PLUGIN = """\
// Written by daintree for session %(name)s: reports opencode's state and token usage to daintree.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";

const SIGNAL = %(signal)s;
const USAGE = %(usage)s;

export const DaintreeSession = async () => {
  const busy = new Set();
  let last = "";
  const signal = (state) => {
    if (state === last) return;
    last = state;
    try {
      spawn(SIGNAL, [state], { stdio: "ignore" }).unref();
    } catch (err) {}
  };
  return {
    event: async ({ event }) => {
      const props = event.properties || {};
      if (event.type === "session.status") {
        const kind = props.status && props.status.type;
        if (kind === "idle") busy.delete(props.sessionID);
        else if (kind) busy.add(props.sessionID);
        signal(busy.size ? "running" : "waiting");
      } else if (event.type === "session.idle") {
        busy.delete(props.sessionID);
        if (!busy.size) signal("waiting");
      } else if (event.type === "permission.asked" || event.type === "permission.updated") {
        signal("waiting");
      } else if (event.type === "permission.replied") {
        signal(busy.size ? "running" : "waiting");
      } else if (event.type === "message.updated") {
        const info = props.info;
        if (!info || info.role !== "assistant" || !info.tokens) return;
        const line = { ts: Date.now() / 1000, id: info.id, session: info.sessionID, model: info.modelID,
                       provider: info.providerID, cost: info.cost, tokens: info.tokens };
        try {
          appendFileSync(USAGE, JSON.stringify(line) + "\\n");
        } catch (err) {}
      }
    },
  };
};
"""


class OpencodeIntegration(AgentIntegration):
    program = "opencode"
    hook_mechanism = "OPENCODE_CONFIG=<session file> naming a plugin: session.status, session.idle, permission.*"
    usage_source = f"message.updated events, appended by the plugin to the session's TMPDIR/{USAGE_FILE}"
    usage_kind = "opencode"
    resume_args = ("--continue",)
    interrupt_keys = ("Escape", "Escape")  # opencode asks for a second esc before it interrupts

    @staticmethod
    def usage_path(ctx: SessionContext) -> Path:
        return (ctx.tmpdir or ctx.session_dir) / USAGE_FILE

    def wire(self, ctx: SessionContext, argv: list[str]) -> Wiring:
        plugin_dir = ctx.session_dir / "opencode" / "plugin"
        plugin = plugin_dir / "daintree-session.js"
        write_private(plugin, PLUGIN % {"name": ctx.name, "signal": json.dumps(str(ctx.signal_script)),
                                        "usage": json.dumps(str(self.usage_path(ctx)))})
        inherited = Path(ctx.env.get("OPENCODE_CONFIG") or "").name == "opencode.json" and \
            Path(ctx.env["OPENCODE_CONFIG"]).parent.parent.name == ".sessions"  # a parent session's, not the user's
        if ctx.env.get("OPENCODE_CONFIG") and not inherited:
            # The user's own config file stays in place; an extra config dir adds our plugin folder.
            return Wiring(list(argv), {"OPENCODE_CONFIG_DIR": str(ctx.session_dir / "opencode")})
        config = ctx.session_dir / "opencode.json"
        write_private(config, json.dumps({"$schema": "https://opencode.ai/config.json",
                                          "plugin": [plugin.as_uri()]}, indent=2) + "\n")
        return Wiring(list(argv), {"OPENCODE_CONFIG": str(config)})

    def records_root(self, ctx: SessionContext) -> Path:
        return self.usage_path(ctx).parent

    def record_files(self, ctx: SessionContext) -> list[Path]:
        path = self.usage_path(ctx)
        return [path] if os.path.lexists(path) else []  # a link is found, and read as untrusted, never followed

    def resume_argv(self, argv: list[str]) -> list[str]:
        return [*argv, *self.resume_args]
