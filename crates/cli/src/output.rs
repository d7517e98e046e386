//! How the agent CLI answers: `--json` prints `{"success", "code", "data"}` and nothing else on
//! stdout; without it, sentences and tables. Exit status 0 on success, 2 on a refusal by the gateway,
//! 1 on any other failure (CONTRACT "Surfaces agree").

use std::io::Write;
use std::process::ExitCode;

use actiongate_client::ClientError;
use serde_json::{Value, json};

/// How a command ended.
pub enum Outcome {
    /// Success: data for `--json`, text for people.
    Done {
        code: &'static str,
        data: Value,
        text: String,
    },
    /// The gateway refused.
    Refused {
        code: String,
        error: String,
        message: String,
    },
    /// Anything else.
    Failed { code: &'static str, message: String },
    /// Success whose output was the data itself, written to stdout as it came (an export):
    /// nothing more is printed, with or without `--json`.
    Streamed,
}

impl Outcome {
    pub fn ok(data: Value, text: impl Into<String>) -> Self {
        Outcome::Done {
            code: "OK",
            data,
            text: text.into(),
        }
    }

    pub fn failed(code: &'static str, message: impl Into<String>) -> Self {
        Outcome::Failed {
            code,
            message: message.into(),
        }
    }

    pub fn from_error(e: ClientError) -> Self {
        match e {
            ClientError::Refused { status, body } if status < 500 => Outcome::Refused {
                code: body.code.as_str().to_owned(),
                error: serde_json::to_value(body.error)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                message: body.message,
            },
            ClientError::Refused { body, .. } => Outcome::Failed {
                code: body.code.as_str(),
                message: body.message,
            },
            ClientError::Transport(m) => Outcome::Failed {
                code: "TRANSPORT",
                message: m,
            },
        }
    }

    /// Prints and answers the exit status. A closed stdout (`| head`) is not an error.
    pub fn finish(self, json_mode: bool) -> ExitCode {
        macro_rules! println {
            ($($t:tt)*) => {{ let _ = writeln!(std::io::stdout(), $($t)*); }};
        }
        match self {
            Outcome::Done { code, data, text } => {
                if json_mode {
                    println!("{}", json!({"success": true, "code": code, "data": data}));
                } else if !text.is_empty() {
                    println!("{text}");
                }
                ExitCode::SUCCESS
            }
            Outcome::Refused {
                code,
                error,
                message,
            } => {
                let hint = next_step(&code);
                if json_mode {
                    println!(
                        "{}",
                        json!({"success": false, "code": code, "data": {"error": error, "message": message, "nextStep": hint}})
                    );
                } else {
                    eprintln!("refused: {code}: {message}");
                    if let Some(h) = hint {
                        eprintln!("next: {h}");
                    }
                }
                ExitCode::from(2)
            }
            Outcome::Streamed => ExitCode::SUCCESS,
            Outcome::Failed { code, message } => {
                if json_mode {
                    println!(
                        "{}",
                        json!({"success": false, "code": code, "data": {"message": message}})
                    );
                } else {
                    eprintln!("error: {message}");
                }
                ExitCode::from(1)
            }
        }
    }
}

/// What to do after a refusal. Never another key or wallet.
pub fn next_step(code: &str) -> Option<&'static str> {
    Some(match code {
        "INSUFFICIENT_CREDITS" | "DAILY_FREE_LIMIT_EXCEEDED" => {
            "buy credits (actiongate credits buy credits_100 --confirm-writes), or wait for 00:00 UTC for the free requests"
        }
        "ACTION_NOT_ALLOWED" => "ask the agent's owner to allow the action in the agent's policy",
        "UNAUTHORIZED" => {
            "sign in: actiongate login --email you@example.com (or set ACTIONGATE_API_KEY)"
        }
        "DELEGATION_REQUIRED" => {
            "a user must delegate to this agent first (actiongate delegation create)"
        }
        "WALLET_IDEMPOTENCY_KEY_REQUIRED" => "pass --idempotency-key, and reuse it if you retry",
        "IDEMPOTENCY_KEY_REUSED" => {
            "this key was used for a different request: use a new --idempotency-key"
        }
        "INVALID_PARAMS" => {
            "compare the params with the action's paramsSchema (actiongate actions catalog)"
        }
        "UNKNOWN_ACTION" => "list the actions: actiongate actions",
        "ACTION_DISABLED" => {
            "the action is not enabled on this gateway; pick another from actiongate actions"
        }
        "POLICY_DAILY_LIMIT" => "the daily limit resets at 00:00 UTC, or the owner can raise it",
        "POLICY_AMOUNT_LIMIT" => "use a smaller amount, or ask the owner to raise the cap",
        "CHAIN_NOT_CONFIGURED" | "UNKNOWN_CHAIN" => {
            "use a chain this gateway runs the action on (--chain-id)"
        }
        "TERMS_NOT_ACCEPTED" => "the terms must be accepted to continue",
        "INVALID_CODE" => "check the code in the e-mail and try again",
        "CODE_EXPIRED" | "TOO_MANY_ATTEMPTS" => "request a new code: actiongate login --email …",
        _ => return None,
    })
}
