//! Client connections: opening one runs the instance's connect hook, and
//! closing one its disconnect hook, unless the instance it was made to is
//! gone.

use crate::caller::Caller;
use crate::cell::Origin;
use crate::config::{MAX_ARGS_BYTES, max_connected_instances};
use crate::connections::{Connection, Limits};
use crate::error::Error;
use crate::runtime::ConflictRetry;

use super::Host;

impl Host {
    /// Opens a connection of `caller` to (`actor`, `key`) with `params`
    /// (JSON text): wakes or creates the instance and runs its connect
    /// hook, which sees `caller` (`burrow:actor/caller`) and may refuse
    /// ([`Error::ConnectionRefused`]). The connection receives the
    /// instance's events until it is dropped; then call
    /// [`Host::disconnect`].
    pub async fn connect_as(
        &self,
        caller: Caller,
        actor: &str,
        key: &str,
        params: &str,
    ) -> Result<Connection, Error> {
        let def = self.core.resolve_ready(actor, key).await?;
        if params.len() > MAX_ARGS_BYTES
            || serde_json::from_str::<serde::de::IgnoredAny>(params).is_err()
        {
            return Err(Error::InvalidArguments {
                actor: actor.into(),
                action: "connect".into(),
                message: format!(
                    "the connection parameters must be JSON of at most {MAX_ARGS_BYTES} bytes"
                ),
            });
        }
        let address = self.core.address(&def, key);
        // Registered first: the instance stays awake from here, and the
        // connect hook's own events reach the new connection.
        let limits = Limits {
            per_instance: def.options.max_connections,
            per_host: self.core.config.max_connections,
            instances: max_connected_instances(self.core.config.max_awake),
        };
        let mut connection = self.core.hub.connect(&address, limits)?;
        connection.count_in(self.core.metrics.actor(actor).clone());
        let id = connection.id;
        ConflictRetry::run(def.options.call_timeout, || async {
            // While the instance is destroyed, wait: the connection is to
            // the instance that comes after.
            let Some(_lease) = self.core.presence.lease(&address) else {
                return Err(Error::conflict(actor, key));
            };
            self.core
                .with_cell(actor, key, Origin::CreateIfMissing("null"), async |cell| {
                    cell.connect(id, params, &caller).await
                })
                .await
        })
        .await?;
        Ok(connection)
    }

    /// Unregisters `connection` and runs its disconnect hook, unless the
    /// instance it was made to is gone: being destroyed, or destroyed and
    /// followed by a new instance at the same address, whose hook must not
    /// hear of connections it never accepted.
    pub async fn disconnect(
        &self,
        actor: &str,
        key: &str,
        connection: Connection,
    ) -> Result<(), Error> {
        let id = connection.id;
        let spec = self.core.listed(actor, key)?;
        let address = self.core.address_of(&spec, key);
        // The instance is being destroyed: the hook goes with it.
        let Some(_lease) = self.core.presence.lease(&address) else {
            return Ok(());
        };
        // Checked under the lease, so no destroy can come in between.
        let current = connection.is_current();
        drop(connection);
        if !current {
            return Ok(());
        }
        ConflictRetry::run(self.core.call_timeout(actor), || {
            self.core
                .with_cell(actor, key, Origin::MustExist, async |cell| {
                    cell.disconnect(id).await
                })
        })
        .await
    }

    /// Connections open right now.
    pub fn connections(&self) -> usize {
        self.core.hub.count()
    }

    /// Closes every client connection (the server is shutting down).
    pub(crate) fn close_connections(&self) {
        self.core.hub.close_all();
    }
}
