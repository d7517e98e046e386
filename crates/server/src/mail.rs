//! Mail delivery: SMTP through lettre when `--smtp-url` is set, else RFC 5322 `.eml` files in the
//! dev outbox (`<data-dir>/outbox/`).

use std::path::PathBuf;

use actiongate_core::mail::{MailError, Mailer, OutgoingMail};
use async_trait::async_trait;
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncFileTransport, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::{SmtpSecurity, SmtpTarget};

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

/// Sends over SMTP as the URL's scheme says: TLS from the first byte (`smtps://`), STARTTLS
/// required (`smtp+starttls://`), or plain (`smtp://`, only when asked for). The server's
/// certificate must chain to the web PKI roots or to a certificate of `roots_pem` (`smtp-ca-file`)
/// and name the host.
pub struct SmtpMailer {
    from: Mailbox,
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl SmtpMailer {
    pub fn new(
        target: &SmtpTarget,
        roots_pem: Option<&[u8]>,
        from: &str,
    ) -> Result<Self, MailError> {
        let from = from
            .parse()
            .map_err(|e| MailError(format!("mail-from: {e}")))?;
        let builder =
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&target.host).port(target.port);
        let builder = match target.security {
            SmtpSecurity::Plain => builder,
            SmtpSecurity::StartTls | SmtpSecurity::Tls => {
                let mut params = TlsParameters::builder(target.host.clone());
                if let Some(pem) = roots_pem {
                    let root = Certificate::from_pem(pem)
                        .map_err(|e| MailError(format!("smtp-ca-file: {e}")))?;
                    params = params.add_root_certificate(root);
                }
                let params = params
                    .build()
                    .map_err(|e| MailError(format!("SMTP TLS: {e}")))?;
                builder.tls(match target.security {
                    SmtpSecurity::StartTls => Tls::Required(params),
                    _ => Tls::Wrapper(params),
                })
            }
        };
        Ok(Self {
            from,
            transport: builder.build(),
        })
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
