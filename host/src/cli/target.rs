//! What a command on an instance runs against: for the commands that
//! change an instance, the server at `--url` or a host embedded in this
//! process (`--local`); for the read-only looks, the server at `--url`,
//! else the data directory read directly, or, while a server runs on it,
//! that server (it holds its awake instances' databases; `host.lock` says
//! where it serves). Each operation is written once here, for both sides;
//! an embedded host is shut down (its instances put to sleep) before the
//! command's output is printed.

use std::path::{Path, PathBuf};

use burrow_client::Client;
use serde_json::Value;

use super::Target;
use super::embedded::{load_manifest, start_host};
use super::output::Failure;
use super::remote::{Remote, client};
use crate::SendOptions;
use crate::error::Error;
use crate::host::Host;
use crate::storage::{Holder, holder};

/// A server, or a host embedded in this process.
pub(super) enum Backend {
    /// A host started on the data directory for this one command.
    Embedded(Host),
    /// The server at the command's `--url`.
    Server(Client),
}

impl Target {
    /// Runs `op` against the server (an `https://` one verified with the
    /// system's roots and `--ca-cert`, sending `--token`), or with `--local`, against a host
    /// embedded in this process, which is shut down afterwards.
    pub(super) async fn run<T>(
        &self,
        manifest: &Path,
        remote: Remote<'_>,
        op: impl AsyncFnOnce(&Backend) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        if !self.local {
            return op(&Backend::Server(client(&self.url, remote)?)).await;
        }
        let host = start_host(manifest, &self.host).await?;
        let backend = Backend::Embedded(host);
        let result = op(&backend).await;
        backend.close().await;
        result
    }
}

impl Backend {
    /// Puts an embedded host's instances to sleep.
    async fn close(self) {
        if let Backend::Embedded(host) = self {
            host.shutdown().await;
        }
    }

    /// Calls `action` with `args` (a JSON array as text); the JSON result text.
    pub(super) async fn call(
        &self,
        actor: &str,
        key: &str,
        action: &str,
        args: &str,
    ) -> Result<String, Failure> {
        Ok(match self {
            Backend::Embedded(host) => {
                ready(host, actor)
                    .await?
                    .call(actor, key, action, args)
                    .await?
            }
            Backend::Server(client) => client.call(actor, key, action, args).await?,
        })
    }

    /// Creates the instance with `input` (JSON text).
    pub(super) async fn create(&self, actor: &str, key: &str, input: &str) -> Result<(), Failure> {
        match self {
            Backend::Embedded(host) => ready(host, actor).await?.create(actor, key, input).await?,
            Backend::Server(client) => client.create(actor, key, input).await?,
        }
        Ok(())
    }

    /// The instance's export file.
    pub(super) async fn export(&self, actor: &str, key: &str) -> Result<Vec<u8>, Failure> {
        Ok(match self {
            Backend::Embedded(host) => ready(host, actor).await?.export(actor, key).await?,
            Backend::Server(client) => client.export(actor, key).await?,
        })
    }

    /// Creates the instance `new_key` from `key`, paused.
    pub(super) async fn fork(&self, actor: &str, key: &str, new_key: &str) -> Result<(), Failure> {
        match self {
            Backend::Embedded(host) => ready(host, actor).await?.fork(actor, key, new_key).await?,
            Backend::Server(client) => client.fork(actor, key, new_key).await?,
        }
        Ok(())
    }

    /// Pauses the instance's background work; whether it was running.
    pub(super) async fn pause(&self, actor: &str, key: &str) -> Result<bool, Failure> {
        Ok(match self {
            Backend::Embedded(host) => ready(host, actor).await?.pause(actor, key).await?,
            Backend::Server(client) => client.pause(actor, key).await?,
        })
    }

    /// Ends the instance's pause; whether it was paused.
    pub(super) async fn resume(&self, actor: &str, key: &str) -> Result<bool, Failure> {
        Ok(match self {
            Backend::Embedded(host) => ready(host, actor).await?.resume(actor, key).await?,
            Backend::Server(client) => client.resume(actor, key).await?,
        })
    }

    /// Creates the instance from an export file.
    pub(super) async fn import(
        &self,
        actor: &str,
        key: &str,
        file: Vec<u8>,
        replace: bool,
    ) -> Result<(), Failure> {
        match self {
            Backend::Embedded(host) => {
                ready(host, actor)
                    .await?
                    .import(actor, key, &file, replace)
                    .await?
            }
            Backend::Server(client) => client.import(actor, key, file, replace).await?,
        }
        Ok(())
    }

    /// Destroys the instance.
    pub(super) async fn destroy(&self, actor: &str, key: &str) -> Result<(), Failure> {
        match self {
            Backend::Embedded(host) => ready(host, actor).await?.destroy(actor, key).await?,
            Backend::Server(client) => client.destroy(actor, key).await?,
        }
        Ok(())
    }

    /// Appends an event to the instance's queue; the outcome as the HTTP
    /// API answers it.
    pub(super) async fn send(
        &self,
        actor: &str,
        key: &str,
        event_type: &str,
        payload: &str,
        options: SendOptions,
    ) -> Result<Value, Failure> {
        Ok(match self {
            Backend::Embedded(host) => {
                let outcome = ready(host, actor)
                    .await?
                    .send(actor, key, event_type, payload, options)
                    .await?;
                serde_json::to_value(outcome).unwrap_or(Value::Null)
            }
            Backend::Server(client) => {
                client
                    .send(actor, key, event_type, payload, &options)
                    .await?
            }
        })
    }

    /// Moves dead letter `id` back into the queue.
    pub(super) async fn requeue(&self, actor: &str, key: &str, id: i64) -> Result<(), Failure> {
        match self {
            Backend::Embedded(host) => ready(host, actor).await?.requeue(actor, key, id).await?,
            Backend::Server(client) => client.requeue(actor, key, id).await?,
        }
        Ok(())
    }

    /// Deletes dead letter `id` for good.
    pub(super) async fn discard(&self, actor: &str, key: &str, id: i64) -> Result<(), Failure> {
        match self {
            Backend::Embedded(host) => ready(host, actor).await?.discard(actor, key, id).await?,
            Backend::Server(client) => client.discard(actor, key, id).await?,
        }
        Ok(())
    }
}

/// The embedded `host` once `actor`'s component is compiled: a command
/// waits for the actor it uses as long as its compilation takes (that one
/// first), not for the others.
async fn ready<'h>(host: &'h Host, actor: &str) -> Result<&'h Host, Failure> {
    host.wait_ready(actor).await?;
    Ok(host)
}

/// Where a read-only look at an instance comes from.
pub(super) enum Source {
    /// The server's answer.
    Server(Client),
    /// The data directory, read without starting a host.
    DataDir(PathBuf),
}

impl Source {
    /// The server at `url` if one is given (`https://` verified with `--ca-cert`, sending `--token`);
    /// else the data directory `data_dir`, by default the manifest's.
    pub(super) fn new(
        manifest: &Path,
        url: Option<String>,
        remote: Remote<'_>,
        data_dir: Option<PathBuf>,
    ) -> Result<Source, Failure> {
        if let Some(url) = url {
            return Ok(Source::Server(client(&url, remote)?));
        }
        let data_dir = match data_dir {
            Some(dir) => dir,
            None => load_manifest(manifest)?.data_dir(),
        };
        // A running host holds its awake instances' databases: ask it.
        match holder(&data_dir)? {
            Holder::Nobody => Ok(Source::DataDir(data_dir)),
            Holder::Server(url) => Ok(Source::Server(client(&url, remote)?)),
            Holder::Host => Err(anyhow::anyhow!(
                "a burrow host that serves no HTTP API holds the data directory {} \
                 (host.lock): wait for it to end, or ask a server with --url",
                data_dir.display()
            )
            .into()),
        }
    }

    /// The instance's state and tables.
    pub(super) async fn inspect(&self, actor: &str, key: &str) -> Result<Value, Failure> {
        match self {
            Source::Server(client) => Ok(client.inspect(actor, key).await?),
            Source::DataDir(data_dir) => {
                let inspection = crate::inspect::inspect(
                    data_dir,
                    actor,
                    key,
                    crate::config::DEFAULT_CALL_TIMEOUT,
                )?;
                Ok(serde_json::to_value(inspection).unwrap_or(Value::Null))
            }
        }
    }

    /// The instance's workflow: status, what it waits for, and history.
    pub(super) async fn workflow(&self, actor: &str, key: &str) -> Result<Value, Failure> {
        match self {
            Source::Server(client) => Ok(client.workflow(actor, key).await?),
            Source::DataDir(data_dir) => {
                let view = crate::inspect::workflow_view(data_dir, actor, key)?
                    .ok_or_else(|| Error::NoWorkflow(actor.to_owned()))?;
                Ok(serde_json::to_value(view).unwrap_or(Value::Null))
            }
        }
    }

    /// The instance's queue: policy, pending events and dead letters.
    pub(super) async fn queue(&self, actor: &str, key: &str) -> Result<Value, Failure> {
        match self {
            Source::Server(client) => Ok(client.queue(actor, key).await?),
            Source::DataDir(data_dir) => {
                let view = crate::inspect::queue_view(data_dir, actor, key)?
                    .ok_or_else(|| Error::NoQueue(actor.to_owned()))?;
                Ok(serde_json::to_value(view).unwrap_or(Value::Null))
            }
        }
    }
}
