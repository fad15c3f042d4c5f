//! Export and import of one instance: its database as committed at one
//! moment, as one file (`crate::export`), and a new instance made from
//! such a file, on this host or any other, alone or in a cluster.

use std::sync::Arc;

use crate::cell::Origin;
use crate::clock::now_ms;
use crate::definition::ActorDefinition;
use crate::error::Error;
use crate::export::{Export, ExportedComponent};
use crate::runtime::ConflictRetry;
use crate::storage::snapshot;

use super::Host;

impl Host {
    /// The instance's database as committed now, with its actor's
    /// component, as the bytes of an export file (see
    /// [`Host::committed_database`]).
    pub async fn export(&self, actor: &str, key: &str) -> Result<Vec<u8>, Error> {
        let (def, database) = self.committed_database(actor, key).await?;
        Ok(Export {
            actor: actor.into(),
            key: key.into(),
            exported_at: now_ms(),
            component: ExportedComponent {
                version: def.version,
                digest: def.digest.clone(),
            },
            database,
        }
        .to_bytes())
    }

    /// Creates the instance (`actor`, `key`) from `file`, an export of an
    /// instance of the same actor (under any key, from any host). The copy
    /// commits as the instance's creation, in place of its `create` hook;
    /// its `migrate` and `wake` hooks run as at every start, and the work
    /// it holds (queue events, schedules, a workflow under way) goes on
    /// from where the copy left it. An existing instance is an error
    /// ([`Error::AlreadyExists`]) unless `replace`, which destroys it
    /// first (its `destroy` hook runs), once the file has been read and
    /// found whole. A file that is not an export, fails its checksum, is
    /// of another actor, or holds what no guest could have made is
    /// [`Error::InvalidExport`], and nothing changes.
    pub async fn import(
        &self,
        actor: &str,
        key: &str,
        file: &[u8],
        replace: bool,
    ) -> Result<(), Error> {
        self.core.listed(actor, key)?;
        let invalid = |reason: String| Error::InvalidExport {
            actor: actor.into(),
            key: key.into(),
            reason,
        };
        let export = Export::parse(file).map_err(invalid)?;
        if export.actor != actor {
            return Err(invalid(format!(
                "holds an instance of `{}`, not of `{actor}`",
                export.actor
            )));
        }
        if replace {
            // The instance is destroyed only for an image that opens (the
            // import checks it again, as it does without `replace`).
            crate::storage::open_image(&export.database).map_err(invalid)?;
            match self.destroy(actor, key).await {
                Ok(()) | Err(Error::NoSuchInstance { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let image = export.database.as_slice();
        ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core.with_cell(
                actor,
                key,
                Origin::Import { image, pause: None },
                async |cell| cell.commit_creation(),
            )
        })
        .await
    }

    /// The database of (`actor`, `key`) as committed now, with the
    /// actor's definition. The instance is not woken: the copy is read
    /// from a connection of its own, in one read transaction, while the
    /// instance goes on.
    pub(super) async fn committed_database(
        &self,
        actor: &str,
        key: &str,
    ) -> Result<(Arc<ActorDefinition>, Vec<u8>), Error> {
        let def = self.core.resolve_ready(actor, key).await?;
        let address = self.core.address(&def, key);
        // In a cluster: this host's file is the replicated one.
        self.core.claim(&address).await?;
        if !self.core.store.exists(&address) {
            return Err(Error::no_such_instance(actor, key));
        }
        // A read of the disk: the worker's other tasks go on elsewhere.
        let database = crate::blocking::off_worker(|| {
            let mut conn = self.core.store.open_reader(&address)?;
            snapshot(&mut conn)
        })
        .map_err(|e| Error::Storage {
            actor: actor.into(),
            key: key.into(),
            message: format!("cannot read the instance's database: {e}"),
        })?;
        Ok((def, database))
    }
}
