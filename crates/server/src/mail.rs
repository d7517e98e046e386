//! Mail delivery: SMTP through lettre when `--smtp-url` is set, else RFC 5322 `.eml` files in the
//! dev outbox (`<data-dir>/outbox/`).

use std::path::PathBuf;

use actiongate_core::mail::{MailError, Mailer, OutgoingMail};
use async_trait::async_trait;
use lettre::message::{Mailbox, header::ContentType};
use lettre::{AsyncFileTransport, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

fn compose(from: &Mailbox, mail: OutgoingMail) -> Result<Message, MailError> {
    let to: Mailbox = mail
        .to
        .parse()
        .map_err(|e| MailError(format!("recipient: {e}")))?;
    Message::builder()
        .from(from.clone())
        .to(to)
        .subject(mail.subject)
        .header(ContentType::TEXT_PLAIN)
        .body(mail.body)
        .map_err(|e| MailError(e.to_string()))
}

/// Sends over plain SMTP (no TLS: a local relay or a test sink).
pub struct SmtpMailer {
    from: Mailbox,
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl SmtpMailer {
    pub fn new(host: &str, port: u16, from: &str) -> Result<Self, MailError> {
        let from = from
            .parse()
            .map_err(|e| MailError(format!("mail-from: {e}")))?;
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
            .port(port)
            .build();
        Ok(Self { from, transport })
    }
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, mail: OutgoingMail) -> Result<(), MailError> {
        let message = compose(&self.from, mail)?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| MailError(e.to_string()))
    }
}

/// Writes each message as one `.eml` file into a directory.
pub struct OutboxMailer {
    from: Mailbox,
    transport: AsyncFileTransport<Tokio1Executor>,
    dir: PathBuf,
}

impl OutboxMailer {
    pub fn new(dir: PathBuf, from: &str) -> Result<Self, MailError> {
        let from = from
            .parse()
            .map_err(|e| MailError(format!("mail-from: {e}")))?;
        Ok(Self {
            from,
            transport: AsyncFileTransport::new(&dir),
            dir,
        })
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

#[async_trait]
impl Mailer for OutboxMailer {
    async fn send(&self, mail: OutgoingMail) -> Result<(), MailError> {
        let message = compose(&self.from, mail)?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| MailError(e.to_string()))
    }
}
