//! Mail over TLS (issue 21, finding 8) to the real SMTP sink: `smtp+starttls://` and `smtps://`
//! deliver only to a server whose certificate chains to a trusted root (`smtp-ca-file` here, a test
//! CA made with openssl) and names the host; `smtp://` is plain, so a server that requires STARTTLS
//! refuses it. Nothing is sent in clear unless the URL says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use actiongate_core::mail::{Mailer, OutgoingMail};
use actiongate_server::config::parse_smtp_url;
use actiongate_server::mail::SmtpMailer;
use actiongate_testkit::SmtpSink;

/// A CA and a server certificate for 127.0.0.1 signed by it; (CA, certificate, key) PEM files.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs (scripts/test installs it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=actiongate-test-ca",
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "key.pem",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write");
    run(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

async fn send(url: &str, roots: Option<&Path>, to: &str) -> Result<(), String> {
    let target = parse_smtp_url(url).map_err(|e| e.to_string())?;
    let pem = roots.map(|p| std::fs::read(p).expect("read the CA"));
    let mailer = SmtpMailer::new(&target, pem.as_deref(), "actiongate <no-reply@example.com>")
        .map_err(|e| e.0)?;
    mailer
        .send(OutgoingMail {
            to: to.into(),
            subject: "Your code".into(),
            body: "123456".into(),
        })
        .await
        .map_err(|e| e.0)
}

#[tokio::test]
async fn mail_goes_over_tls_when_the_url_says_so_and_only_to_a_trusted_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = certificates(dir.path());
    let starttls_dir = dir.path().join("starttls");
    let implicit_dir = dir.path().join("implicit");
    std::fs::create_dir_all(&starttls_dir).expect("mkdir");
    std::fs::create_dir_all(&implicit_dir).expect("mkdir");
    let starttls = SmtpSink::start_tls(&starttls_dir, "starttls", &cert, &key);
    let implicit = SmtpSink::start_tls(&implicit_dir, "implicit", &cert, &key);

    // STARTTLS and implicit TLS, the server's certificate trusted through smtp-ca-file: delivered.
    let url = format!("smtp+starttls://127.0.0.1:{}", starttls.port);
    send(&url, Some(&ca), "a@example.com")
        .await
        .expect("delivered over STARTTLS");
    let url_tls = format!("smtps://127.0.0.1:{}", implicit.port);
    send(&url_tls, Some(&ca), "b@example.com")
        .await
        .expect("delivered over TLS");

    // A certificate no trusted root signed: refused before any message goes out.
    assert!(
        send(&url, None, "c@example.com").await.is_err(),
        "an untrusted STARTTLS server"
    );
    assert!(
        send(&url_tls, None, "c@example.com").await.is_err(),
        "an untrusted TLS server"
    );
    // smtp:// is plain: the server that requires STARTTLS refuses it.
    let plain = format!("smtp://127.0.0.1:{}", starttls.port);
    assert!(
        send(&plain, Some(&ca), "c@example.com").await.is_err(),
        "plain to a STARTTLS-only server"
    );

    assert_eq!(starttls.messages_to("a@example.com").len(), 1);
    assert_eq!(implicit.messages_to("b@example.com").len(), 1);
    assert!(starttls.messages_to("c@example.com").is_empty());
    assert!(implicit.messages_to("c@example.com").is_empty());
}
