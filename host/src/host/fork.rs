//! Fork, pause and resume: a new instance made from another's database as
//! committed now, its background work paused until it is resumed, so that
//! a copy never repeats by itself what its original did in the world; and
//! the pause of any instance's background work, and its end.

use crate::cell::Origin;
use crate::error::Error;
use crate::runtime::ConflictRetry;

use super::Host;

impl Host {
    /// Creates the instance (`actor`, `new_key`) from the database of
    /// (`actor`, `key`) as committed now, which goes on untouched (it is
    /// not woken). The new instance is made as an import is (its
    /// `migrate` and `wake` hooks run, not `create`), paused: its queue
    /// is not processed, its schedules do not run and its workflow is not
    /// driven until [`Host::resume`]. Its calls run as any instance's.
    /// An existing `new_key` is [`Error::AlreadyExists`].
    pub async fn fork(&self, actor: &str, key: &str, new_key: &str) -> Result<(), Error> {
        self.core.listed(actor, new_key)?;
        if key == new_key {
            return Err(Error::already_exists(actor, new_key));
        }
        let (_, database) = self.committed_database(actor, key).await?;
        let reason = format!("a fork of the key `{key}`");
        let origin = Origin::Import {
            image: &database,
            pause: Some(&reason),
        };
        let forked = ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, new_key, origin, async |cell| cell.commit_creation())
        })
        .await;
        match forked {
            // In a cluster, another host serves an instance of that key:
            // it exists (the request was routed by the original's key).
            Err(Error::Moved { key, .. }) if key == new_key => {
                Err(Error::already_exists(actor, new_key))
            }
            other => other,
        }
    }

    /// Pauses the background work of (`actor`, `key`) as a fork's is:
    /// what runs finishes (the events in flight, a batch of schedules,
    /// the workflow's current run), and nothing more starts until
    /// [`Host::resume`]; calls go on. Returns whether it was running (a
    /// paused instance is left as it is).
    pub async fn pause(&self, actor: &str, key: &str) -> Result<bool, Error> {
        ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.pause("paused by an operator")
                })
        })
        .await
    }

    /// Ends the pause of (`actor`, `key`)'s background work (see
    /// [`Host::fork`]): its queue, schedules and workflow go on from
    /// where its database holds them. Returns whether it was paused; an
    /// instance that was not is left as it is.
    pub async fn resume(&self, actor: &str, key: &str) -> Result<bool, Error> {
        ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, key, Origin::MustExist, async |cell| cell.resume())
        })
        .await
    }
}
