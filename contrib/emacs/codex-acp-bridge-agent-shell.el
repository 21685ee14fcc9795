;;; codex-acp-bridge-agent-shell.el --- Codex through codex-acp-bridge in agent-shell  -*- lexical-binding: t; -*-

;; Where it goes: your Emacs init file (e.g. ~/.emacs.d/init.el): paste it there, or keep
;; this file and load it from there:
;;   (load "/path/to/codex-acp-bridge/contrib/emacs/codex-acp-bridge-agent-shell.el")
;; Needs the agent-shell package (MELPA).  Then M-x agent-shell and pick
;; "Codex (ACP bridge)", or M-x codex-acp-bridge-agent-shell.
;;
;; Followed (xenodium/agent-shell, main as of 2026-08, agent-shell 0.79):
;;   - agent-shell.el: `agent-shell-make-agent-config' (its keyword arguments),
;;     `agent-shell-agent-configs' (entries are config alists, or functions returning one),
;;     `agent-shell--make-acp-client' and `agent-shell-make-environment-variables':
;;     https://github.com/xenodium/agent-shell/blob/main/agent-shell.el
;;   - agent-shell-openai.el: the built-in Codex config, whose shape this one copies:
;;     https://github.com/xenodium/agent-shell/blob/main/agent-shell-openai.el
;;   - README.org, "Inheriting environment variables" (agents start with a minimal
;;     environment unless given :inherit-env t):
;;     https://github.com/xenodium/agent-shell/blob/main/README.org
;;
;; The command is `codex-acp-bridge serve', with codex-acp-bridge on PATH (as after
;; `pipx install codex-acp-bridge' or `uv tool install codex-acp-bridge').  No ACP
;; `authenticate' is sent (:needs-authentication nil): the bridge uses Codex's stored login, so
;; run `codex-acp-bridge login' once in a terminal.

;;; Code:

(defvar codex-acp-bridge-agent-shell-command '("codex-acp-bridge" "serve")
  "The program that serves ACP on stdio, and its arguments.
For a Codex config profile ($CODEX_HOME/NAME.config.toml over config.toml),
add \"--profile\" \"NAME\" to the list.")

(defun codex-acp-bridge-agent-shell-config ()
  "Return the agent-shell configuration of codex-acp-bridge."
  (agent-shell-make-agent-config
   :identifier 'codex-acp-bridge
   :mode-line-name "Codex (ACP bridge)"
   :buffer-name "Codex (ACP bridge)"
   :shell-prompt "Codex> "
   :shell-prompt-regexp "Codex> "
   :needs-authentication nil
   :client-maker (lambda (buffer)
                   (agent-shell--make-acp-client
                    :command (car codex-acp-bridge-agent-shell-command)
                    :command-params (cdr codex-acp-bridge-agent-shell-command)
                    ;; Codex needs HOME (for ~/.codex) and the bridge the daemon's runtime
                    ;; directory (XDG_RUNTIME_DIR or TMPDIR): pass Emacs's environment on.
                    :environment-variables (agent-shell-make-environment-variables
                                            :inherit-env t)
                    :context-buffer buffer))
   :install-instructions
   "pipx install codex-acp-bridge (or: uv tool install codex-acp-bridge); then run `codex-acp-bridge login' once."))

(defun codex-acp-bridge-agent-shell ()
  "Start an agent-shell with Codex through codex-acp-bridge."
  (interactive)
  (agent-shell--dwim :config (codex-acp-bridge-agent-shell-config)
                     :new-shell t))

(with-eval-after-load 'agent-shell
  ;; A configuration alist (accepted by every agent-shell version; newer ones also take the
  ;; function itself).  Skipped when `agent-shell-agent-configs' is set to a function, which
  ;; cannot be added to: return the config from that function instead.
  (unless (functionp agent-shell-agent-configs)
    (add-to-list 'agent-shell-agent-configs (codex-acp-bridge-agent-shell-config) t)))

(provide 'codex-acp-bridge-agent-shell)

;;; codex-acp-bridge-agent-shell.el ends here
