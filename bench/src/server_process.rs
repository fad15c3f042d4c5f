//! `burrow serve` in a child process, for the HTTP workloads of the
//! durability modes: the bench process only sends the requests, so the
//! load comes from another process, as it does in production (and both
//! share the machine's cores, as they would with `wrk`).
//!
//! The child runs the executable the bench runs in (the `burrow` binary,
//! which links this crate) on a manifest of its own, written in its data
//! directory, that holds only the `counter` actor (so the server compiles
//! nothing else), with `--synchronous` set to the mode measured.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use burrow::config::Synchronous;
use burrow::manifest::ActorSpec;

/// How long the server may take to answer `GET /healthz` after its start
/// (it compiles the counter's component first).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the server may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `burrow serve`.
pub(super) struct ServerProcess {
    child: tokio::process::Child,
    /// Its base URL, such as `http://127.0.0.1:40123`.
    pub(super) url: String,
    log: PathBuf,
}

/// The manifest of the child: the counter alone, its component by its
/// absolute path.
fn counter_manifest(spec: &ActorSpec) -> Result<String> {
    let component = std::path::absolute(&spec.component)?;
    let mut actor = toml::Table::new();
    actor.insert(
        "component".into(),
        toml::Value::String(component.to_string_lossy().into_owned()),
    );
    let mut actors = toml::Table::new();
    actors.insert(spec.name.clone(), toml::Value::Table(actor));
    let mut manifest = toml::Table::new();
    manifest.insert("actors".into(), toml::Value::Table(actors));
    Ok(toml::to_string(&manifest)?)
}

fn mode_name(mode: Synchronous) -> &'static str {
    match mode {
        Synchronous::Off => "off",
        Synchronous::Normal => "normal",
        Synchronous::Full => "full",
    }
}

/// A free port on the loopback interface (free when asked).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl ServerProcess {
    /// Starts `burrow serve` on a fresh `dir` with `mode`, serving `spec`,
    /// and waits until it answers.
    pub(super) async fn start(
        spec: &ActorSpec,
        dir: &Path,
        mode: Synchronous,
    ) -> Result<ServerProcess> {
        ServerProcess::start_with(spec, dir, mode, &[]).await
    }

    /// [`ServerProcess::start`] with `extra` arguments of `burrow serve`.
    pub(super) async fn start_with(
        spec: &ActorSpec,
        dir: &Path,
        mode: Synchronous,
        extra: &[String],
    ) -> Result<ServerProcess> {
        std::fs::create_dir_all(dir)?;
        let manifest = dir.join("burrow.toml");
        std::fs::write(&manifest, counter_manifest(spec)?)?;
        let log = dir.join("serve.log");
        let port = free_port()?;
        let binary = std::env::current_exe().context("cannot find the burrow binary")?;
        let child = tokio::process::Command::new(&binary)
            .arg("--manifest")
            .arg(&manifest)
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--synchronous")
            .arg(mode_name(mode))
            .args(extra)
            .env("BURROW_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {} serve", binary.display()))?;
        let mut server = ServerProcess {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        server.wait_until_ready().await?;
        Ok(server)
    }

    async fn wait_until_ready(&mut self) -> Result<()> {
        let http = burrow::client::Trust::system().http_client().build()?;
        let health = format!("{}/healthz", self.url);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "`burrow serve` exited ({status}) before it answered: {}",
                    self.log_tail()
                );
            }
            if let Ok(answer) = http.get(&health).send().await
                && answer.status().is_success()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "`burrow serve` did not answer within {START_TIMEOUT:?}: {}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Its process id, while it runs.
    pub(super) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the server with SIGKILL.
    pub(super) async fn kill(mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// Stops the server with SIGTERM (it puts its instances to sleep), or
    /// kills it if it does not stop in time.
    pub(super) async fn stop(mut self) -> Result<()> {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status()
                .await;
        }
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                if !status.success() {
                    bail!("`burrow serve` stopped with {status}: {}", self.log_tail());
                }
            }
            Err(_) => {
                self.child.kill().await?;
                bail!("`burrow serve` did not stop within {STOP_TIMEOUT:?}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_manifest_holds_only_the_counter() {
        let spec = ActorSpec::new("counter", "/guests/counter.wasm");
        let text = counter_manifest(&spec).unwrap();
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        let actors = parsed["actors"].as_table().unwrap();
        assert_eq!(actors.len(), 1);
        assert_eq!(
            actors["counter"]["component"].as_str(),
            Some("/guests/counter.wasm")
        );
        assert_eq!(parsed.len(), 1);
    }
}
