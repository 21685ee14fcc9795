-- CodeCompanion.nvim: Codex through codex-acp-bridge, as a custom ACP adapter.
--
-- Where it goes: your Neovim configuration, e.g. ~/.config/nvim/lua/config/codecompanion.lua
-- required from init.lua (or merge `adapters.acp.codex_acp_bridge` and `interactions.chat.adapter`
-- into the require("codecompanion").setup({...}) you already have). Then :CodeCompanionChat opens a
-- chat with "Codex (ACP bridge)"; in a chat, `ga` switches adapters.
--
-- Followed (olimorris/codecompanion.nvim, main as of 2026-08, commit f1afd025):
--   * doc/configuration/adapters-acp.md, "Creating Custom ACP Adapters" (the adapter table below is
--     that template's shape) and "Setting a Default Adapter":
--     https://github.com/olimorris/codecompanion.nvim/blob/main/doc/configuration/adapters-acp.md
--     (published at https://codecompanion.olimorris.dev/configuration/adapters-acp)
--   * lua/codecompanion/adapters/acp/codex.lua, the built-in Codex adapter (roles, opts.vision):
--     https://github.com/olimorris/codecompanion.nvim/blob/main/lua/codecompanion/adapters/acp/codex.lua
--
-- The command is `codex-acp-bridge serve`, with codex-acp-bridge on PATH (as after
-- `pipx install codex-acp-bridge` or `uv tool install codex-acp-bridge`).
--
-- Sign-in: without an `auth` handler CodeCompanion calls ACP `authenticate` with the first method
-- the agent lists, which for the bridge is the ChatGPT browser sign-in, on every start. The
-- `auth` handler below returns true instead, so the bridge uses Codex's stored login: run
-- `codex-acp-bridge login` once in a terminal. To use an API key instead, delete the `auth`
-- handler, set `defaults.auth_method = "api-key"` and export OPENAI_API_KEY before starting Neovim.
require("codecompanion").setup({
  adapters = {
    acp = {
      codex_acp_bridge = function()
        local helpers = require("codecompanion.adapters.acp.helpers")
        return {
          name = "codex_acp_bridge",
          formatted_name = "Codex (ACP bridge)",
          type = "acp",
          roles = {
            llm = "assistant",
            user = "user",
          },
          opts = {
            vision = true,
          },
          commands = {
            -- A Codex config profile ($CODEX_HOME/NAME.config.toml): add "--profile", "NAME".
            default = { "codex-acp-bridge", "serve" },
          },
          defaults = {
            mcpServers = {},
            timeout = 20000, -- 20 seconds
          },
          parameters = {
            protocolVersion = 1,
            clientCapabilities = {
              fs = { readTextFile = true, writeTextFile = true },
            },
            clientInfo = {
              name = "CodeCompanion.nvim",
              version = "1.0.0",
            },
          },
          handlers = {
            setup = function(self)
              return true
            end,
            auth = function(self)
              return true -- Codex's stored login (see the note at the top)
            end,
            form_messages = function(self, messages, capabilities)
              return helpers.form_messages(self, messages, capabilities)
            end,
            on_exit = function(self, code) end,
          },
        }
      end,
    },
  },
  -- Make it the chat's default adapter (drop this to keep yours).
  interactions = {
    chat = {
      adapter = "codex_acp_bridge",
    },
  },
})
