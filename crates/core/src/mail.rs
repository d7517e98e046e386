//! The mail port: the core composes messages, an adapter delivers them (SMTP, or the dev outbox).

use async_trait::async_trait;

/// A plain-text message to one recipient.
#[derive(Debug, Clone)]
pub struct OutgoingMail {
    pub to: String,
    pub subject: String,
    pub body: String,
}

/// A delivery failure; its text is for the log.
#[derive(Debug, thiserror::Error)]
#[error("mail: {0}")]
pub struct MailError(pub String);

#[async_trait]
pub trait Mailer: Send + Sync + 'static {
    async fn send(&self, mail: OutgoingMail) -> Result<(), MailError>;
}
