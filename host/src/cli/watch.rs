//! `burrow watch`: a subscription to an instance's events on a server,
//! printed as it arrives. Only a server has connections: there is no
//! embedded variant.

use std::io::Write;

use super::output::{Failure, parse_json_arg};
use super::remote::{Remote, client};

/// Prints the events of an instance, one JSON line each, as the server
/// sends them, until the server closes the connection; Ctrl-C closes it
/// from this side.
pub(super) async fn watch(
    actor: &str,
    key: &str,
    params: Option<&str>,
    url: &str,
    remote: Remote<'_>,
) -> Result<(), Failure> {
    let params = params
        .map(|text| parse_json_arg(text, "the parameters"))
        .transpose()?;
    let mut subscription = client(url, remote)?
        .actor(actor, key)
        .subscribe(params.as_ref())
        .await?;
    eprintln!("connected as {}", subscription.id());
    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No Ctrl-C handler: only the server ends the watch.
            std::future::pending::<()>().await
        }
    };
    tokio::pin!(interrupted);
    loop {
        let frame = tokio::select! {
            frame = subscription.next_text() => frame,
            _ = &mut interrupted => {
                subscription.close().await;
                return Ok(());
            }
        };
        let Some(frame) = frame else {
            return Ok(());
        };
        let frame = frame?;
        let mut stdout = std::io::stdout().lock();
        let written = writeln!(stdout, "{frame}").and_then(|()| stdout.flush());
        drop(stdout);
        match written {
            Ok(()) => {}
            // The reader went away (`burrow watch ... | head -1`): done.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                subscription.close().await;
                return Ok(());
            }
            Err(e) => {
                subscription.close().await;
                return Err(anyhow::Error::new(e)
                    .context("cannot write to stdout")
                    .into());
            }
        }
    }
}
