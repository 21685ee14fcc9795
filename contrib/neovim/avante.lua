-- avante.nvim: Codex through codex-acp-bridge, as an ACP provider (`acp_providers`).
--
-- Where it goes: your Neovim configuration, e.g. ~/.config/nvim/lua/config/avante.lua required
-- from init.lua, or as the `opts` of avante's lazy.nvim spec (or merge `provider` and the
-- `acp_providers` entry into the require("avante").setup({...}) you already have). Then
-- :AvanteChat, or :AvanteSwitchProvider codex-acp-bridge.
--
-- Followed (yetone/avante.nvim, main as of 2026-08, commit a9334315):
--   * README.md, "ACP Support": providers are configured in `acp_providers`:
--     https://github.com/yetone/avante.nvim#acp-support
--   * lua/avante/config.lua, the `acp_providers` documentation and defaults (`command`, `args`,
--     `env`, optional `auth_method`; the built-in "codex" entry passes HOME and PATH):
--     https://github.com/yetone/avante.nvim/blob/main/lua/avante/config.lua
--   * lua/avante/libs/acp_client.lua: the agent gets PATH plus `env` and nothing else, and
--     `authenticate` is sent only when `auth_method` is set:
--     https://github.com/yetone/avante.nvim/blob/main/lua/avante/libs/acp_client.lua
--
-- The command is `codex-acp-bridge serve`, with codex-acp-bridge on PATH (as after
-- `pipx install codex-acp-bridge` or `uv tool install codex-acp-bridge`).
--
-- Because only PATH and `env` reach the bridge, `env` passes on what it and Codex need: HOME (for
-- ~/.codex), and where a daemon's runtime directory is (XDG_RUNTIME_DIR, TMPDIR). Unset
-- variables are nil and simply left out. No `auth_method`: the bridge uses Codex's stored login
-- (run `codex-acp-bridge login` once in a terminal). For an API key instead, add
-- `auth_method = "api-key"` and `OPENAI_API_KEY = os.getenv("OPENAI_API_KEY")` to `env`.
require("avante").setup({
  provider = "codex-acp-bridge",
  acp_providers = {
    ["codex-acp-bridge"] = {
      command = "codex-acp-bridge",
      args = { "serve" },
      -- For a Codex config profile ($CODEX_HOME/NAME.config.toml): "serve", "--profile", "NAME".
      env = {
        HOME = os.getenv("HOME"),
        CODEX_HOME = os.getenv("CODEX_HOME"),
        CODEX_ACP_BRIDGE_CODEX_BIN = os.getenv("CODEX_ACP_BRIDGE_CODEX_BIN"),
        CODEX_ACP_BRIDGE_RUNTIME_DIR = os.getenv("CODEX_ACP_BRIDGE_RUNTIME_DIR"),
        CODEX_ACP_BRIDGE_PROFILE = os.getenv("CODEX_ACP_BRIDGE_PROFILE"),
        XDG_RUNTIME_DIR = os.getenv("XDG_RUNTIME_DIR"),
        TMPDIR = os.getenv("TMPDIR"),
      },
    },
  },
})
