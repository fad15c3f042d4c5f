//! Several hosts, one actor space: the instance store's second backend,
//! on PostgreSQL.
//!
//! Each instance is owned by at most one member at a time through a lease
//! with an epoch (`leases.rs`, `members.rs`); its SQLite database stays the
//! engine, and its local file becomes a cache of the copy in PostgreSQL,
//! to which every commit's pages are shipped, fenced by the epoch, before
//! anything of the commit is released (`shipper.rs`). The marks of the
//! queue, workflow and schedules live there too, so that any member's
//! timer can find the work of an instance whose host died (`marks.rs`).
//!
//! PostgreSQL is reached from a runtime of the cluster's own (two threads):
//! the host's workers never poll a PostgreSQL connection, and a commit
//! stage that waits for its shipment, blocking its thread, cannot stall
//! the task that writes it, whatever runtime the host runs on.

mod deploys;
mod handover;
mod leases;
mod marks;
mod members;
mod schema;
pub mod shipper;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::mpsc;

use crate::address::Address;
use crate::config::ClusterConfig;

pub use deploys::{Component, DeployRecord};
pub use leases::{Acquired, Held, LeaseSlot, Owner, Taken};
pub use members::Member;
use shipper::{Ack, Queued, Shipment};

/// Connections to PostgreSQL a host keeps at most.
const POOL_SIZE: usize = 8;

/// Why the cluster could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// PostgreSQL could not be reached or refused the statement.
    #[error("PostgreSQL: {0}")]
    Unavailable(String),
    /// The write's fence did not pass: this host no longer owns the
    /// instance at that epoch (or its copy is not the replicated one).
    #[error("this host no longer holds the instance's lease; nothing was written")]
    Fenced,
    /// This host's membership has expired; it is joining again.
    #[error("this host's membership of the cluster has expired; it is joining again")]
    NotMember,
}

impl From<tokio_postgres::Error> for ClusterError {
    fn from(e: tokio_postgres::Error) -> ClusterError {
        ClusterError::Unavailable(match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        })
    }
}

impl From<deadpool_postgres::PoolError> for ClusterError {
    fn from(e: deadpool_postgres::PoolError) -> ClusterError {
        ClusterError::Unavailable(format!("no connection: {e}"))
    }
}

/// What is told when leases are lost (see [`Cluster::on_lost`]).
type OnLost = Box<dyn Fn(Option<&Address>) + Send + Sync>;

/// What every part of the cluster shares.
pub struct Shared {
    pub config: ClusterConfig,
    /// How to connect: the pool's connections and the member's session.
    pg: tokio_postgres::Config,
    pool: Pool,
    member: Mutex<Member>,
    /// Set when the host left: no heartbeat, no shipment, no lease.
    left: AtomicBool,
    /// Set when the host began to drain: no lease it does not hold, no
    /// due work claimed (`handover.rs`).
    draining: AtomicBool,
    leases: Mutex<HashMap<Address, Arc<LeaseSlot>>>,
    /// Owners of instances this host met held elsewhere, to forward to
    /// without asking PostgreSQL each time.
    owners: Mutex<HashMap<Address, Owner>>,
    shipments: mpsc::UnboundedSender<Queued>,
    /// Told when leases are lost: of one instance, or (`None`) of all.
    on_lost: Mutex<Option<OnLost>>,
    /// What the shipper wrote since this host joined.
    shipped: ShipperStats,
    /// The key hosts of the cluster sign their requests to each other with.
    secret: std::sync::OnceLock<Vec<u8>>,
    /// Wakes the heartbeat before its time (the member's session ended).
    wake_heartbeat: Arc<tokio::sync::Notify>,
    /// The last deploy this host took up (`deploys.rs`), written in the
    /// row of every membership it joins with.
    deploys_taken: AtomicI64,
    /// The last version deployed of each actor, as the leases this host
    /// took said (`deploys.rs`).
    deployed: Mutex<HashMap<String, u64>>,
}

/// What the shipper wrote.
#[derive(Default)]
pub struct ShipperStats {
    /// Shipments PostgreSQL took or refused.
    pub shipments: AtomicU64,
    /// Batches written (one round trip and commit of PostgreSQL each, per
    /// round).
    pub batches: AtomicU64,
    /// Statements (rounds) of those batches.
    pub statements: AtomicU64,
}

impl Shared {
    fn lost(&self, address: Option<&Address>) {
        if let Some(on_lost) = &*lock(&self.on_lost) {
            on_lost(address);
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, ClusterError> {
        Ok(self.pool.get().await?)
    }

    /// How long a membership is valid, by this host's clock, after the
    /// heartbeat that renewed it was sent.
    fn valid_for(&self) -> Duration {
        self.config.lease.saturating_sub(self.config.margin)
    }

    pub fn member(&self) -> Member {
        lock(&self.member).clone()
    }

    fn left(&self) -> bool {
        self.left.load(Ordering::Relaxed)
    }

    /// A heartbeat of `member` renewed it until `until`.
    fn renewed(&self, member: &Member, until: Instant) {
        let mut current = lock(&self.member);
        if current.id == member.id {
            current.valid_until = until;
        }
    }

    /// This host joined again as `member`: every lease held under the old
    /// membership is void. A local copy that was current stays known as
    /// such, so that taking its lease again needs no restore when nobody
    /// wrote meanwhile.
    fn rejoined(&self, member: Member) {
        *lock(&self.member) = member;
        for slot in lock(&self.leases).values() {
            slot.forget_lease();
        }
        lock(&self.owners).clear();
        self.lost(None);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A host's place in a cluster (see the module docs).
pub struct Cluster {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Dropping a runtime waits for its tasks, which an async context
        // may not do.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Cluster {
    /// Connects to PostgreSQL at `config.url`, creates the tables if they
    /// are missing, and joins as a new member.
    pub async fn join(config: ClusterConfig) -> anyhow::Result<Cluster> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("burrow-cluster")
            .enable_all()
            .build()?;
        let mut pg: tokio_postgres::Config = config.url.parse().map_err(|e| {
            anyhow::anyhow!("the cluster URL is not a PostgreSQL connection string: {e}")
        })?;
        // The host's statements are few and prepared once per connection:
        // planned once, not at every execution (the shipper's statement
        // takes longer to plan than to run).
        let options = match pg.get_options() {
            Some(given) => format!("{given} -c plan_cache_mode=force_generic_plan"),
            None => "-c plan_cache_mode=force_generic_plan".to_owned(),
        };
        pg.options(&options);
        let manager = Manager::from_config(
            pg.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(config.lease))
            .create_timeout(Some(config.lease))
            .build()?;
        let (shipments, queue) = mpsc::unbounded_channel();
        let placeholder = Member {
            id: String::new(),
            incarnation: 0,
            valid_until: Instant::now(),
            session: None,
        };
        let shared = Arc::new(Shared {
            config,
            pg,
            pool,
            member: Mutex::new(placeholder),
            left: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            leases: Mutex::default(),
            owners: Mutex::default(),
            shipments,
            on_lost: Mutex::new(None),
            shipped: ShipperStats::default(),
            secret: std::sync::OnceLock::new(),
            wake_heartbeat: Arc::default(),
            deploys_taken: AtomicI64::new(0),
            deployed: Mutex::default(),
        });
        // From here the runtime is dropped as the cluster's, in the
        // background, whatever fails.
        let cluster = Cluster {
            shared,
            runtime: Some(runtime),
        };
        let (shared, runtime) = (&cluster.shared, cluster.runtime.as_ref().expect("just set"));
        let setup = shared.clone();
        let joined = runtime
            .spawn(async move {
                let secret = create_schema(&setup).await?;
                let _ = setup.secret.set(secret);
                members::join(&setup, 1).await
            })
            .await?;
        let member = joined.map_err(|e| {
            anyhow::anyhow!(
                "cannot join the cluster at {}: {e}",
                redact(&shared.config.url)
            )
        })?;
        tracing::info!(host = %member.id, address = %shared.config.advertise, "joined the cluster");
        *lock(&shared.member) = member;
        runtime.spawn(members::beat(
            Arc::downgrade(shared),
            shared.config.heartbeat,
            shared.wake_heartbeat.clone(),
        ));
        runtime.spawn(shipper::run(Arc::downgrade(shared), queue));
        Ok(cluster)
    }

    /// Has `on_lost` told when this host loses leases: of one instance
    /// (its local copy was not the replicated one any more), or, with
    /// `None`, of every instance (its membership expired). What serves
    /// those instances here (client connections) must stop.
    pub fn on_lost(&self, on_lost: impl Fn(Option<&Address>) + Send + Sync + 'static) {
        *lock(&self.shared.on_lost) = Some(Box::new(on_lost));
    }

    /// Tells that this host lost the lease of `address`.
    pub fn lost(&self, address: &Address) {
        self.shared.lost(Some(address));
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.shared.config
    }

    /// Runs `work` on the cluster's runtime, at most a lease.
    async fn run<T, F, W>(&self, work: W) -> Result<T, ClusterError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, ClusterError>> + Send + 'static,
        W: FnOnce(Arc<Shared>) -> F,
    {
        let work = work(self.shared.clone());
        let timeout = self.shared.config.lease;
        let runtime = self.runtime.as_ref().expect("until dropped");
        let task = runtime.spawn(async move {
            match tokio::time::timeout(timeout, work).await {
                Ok(result) => result,
                Err(_) => Err(ClusterError::Unavailable(format!(
                    "no answer within {} ms",
                    timeout.as_millis()
                ))),
            }
        });
        task.await
            .map_err(|e| ClusterError::Unavailable(format!("the cluster's task failed: {e}")))?
    }

    /// This host's membership as it is now.
    pub fn member(&self) -> Member {
        self.shared.member()
    }

    /// The key hosts of the cluster sign their requests to each other
    /// with, shared through PostgreSQL.
    pub fn secret(&self) -> &[u8] {
        self.shared.secret.get().map_or(&[], Vec::as_slice)
    }

    /// Waits until this host is a valid member, at most a lease. Returns
    /// the membership.
    pub async fn valid_member(&self) -> Result<Member, ClusterError> {
        let until = Instant::now() + self.shared.config.lease;
        loop {
            let member = self.member();
            if member.valid() && !self.shared.left() {
                return Ok(member);
            }
            if self.shared.left() || Instant::now() >= until {
                return Err(ClusterError::NotMember);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What this host knows of the lease of `address`.
    pub fn slot(&self, address: &Address) -> Arc<LeaseSlot> {
        lock(&self.shared.leases)
            .entry(address.clone())
            .or_insert_with(|| Arc::new(LeaseSlot::new(address.clone())))
            .clone()
    }

    /// Takes the lease of `address` for this host (member `me`), unless
    /// another member holds it, or, while this host drains, unless the
    /// request should go to another member (`handover`).
    pub async fn acquire(&self, me: &Member, address: &Address) -> Result<Acquired, ClusterError> {
        let (id, address) = (me.id.clone(), address.clone());
        let acquired = self
            .run(|shared| async move {
                if shared.draining()
                    && let Some(elsewhere) =
                        handover::elsewhere_while_draining(&shared, &id, &address).await?
                {
                    return Ok(elsewhere);
                }
                leases::acquire(&shared, &id, &address).await
            })
            .await?;
        Ok(acquired)
    }

    /// Writes the replicated database of instance `id` into `image`.
    pub async fn restore(&self, id: i64, image: crate::pages::Image) -> Result<(), ClusterError> {
        self.run(|shared| async move { leases::restore(&shared, id, image).await })
            .await
    }

    /// Queues `shipment` for PostgreSQL; its acknowledgement says how it
    /// went.
    pub fn ship(&self, shipment: Shipment) -> Arc<Ack> {
        if self.shared.left() {
            return Ack::refused("the host left the cluster");
        }
        let ack = Arc::new(Ack::default());
        match self.shared.shipments.send((shipment, ack.clone())) {
            Ok(()) => ack,
            Err(_) => Ack::refused("the shipper has stopped"),
        }
    }

    /// Waits, blocking the thread, for `ack`: at most a lease, past which
    /// this host's membership, and with it the write's fence, is gone.
    pub fn wait(&self, ack: &Ack) -> Result<(), ClusterError> {
        ack.wait(self.shared.config.lease + self.shared.config.margin)
    }

    /// The owner of `address` this host last met, if another member.
    pub fn known_owner(&self, address: &Address) -> Option<Owner> {
        lock(&self.shared.owners).get(address).cloned()
    }

    /// Remembers that `owner` holds `address` (or forgets it, with `None`).
    pub fn note_owner(&self, address: &Address, owner: Option<Owner>) {
        let mut owners = lock(&self.shared.owners);
        match owner {
            Some(owner) => owners.insert(address.clone(), owner),
            None => owners.remove(address),
        };
    }

    /// Gives back every lease of this host and leaves the cluster: other
    /// hosts take its instances at once, without waiting for its lease to
    /// expire. Its instances must be asleep (their commits shipped).
    pub async fn leave(&self) -> Result<u64, ClusterError> {
        let me = self.member().id;
        self.shared.left.store(true, Ordering::Relaxed);
        let released = self
            .run(|shared| async move {
                let client = shared.client().await?;
                let released = client
                    .execute(
                        "UPDATE burrow_instances SET owner = NULL WHERE owner = $1",
                        &[&me],
                    )
                    .await?;
                client
                    .execute("DELETE FROM burrow_hosts WHERE id = $1", &[&me])
                    .await?;
                Ok(released)
            })
            .await?;
        for slot in lock(&self.shared.leases).values() {
            slot.forget_lease();
        }
        Ok(released)
    }

    /// Shipments, batches and statements the shipper wrote since this host
    /// joined.
    pub fn shipped(&self) -> (u64, u64, u64) {
        let shipped = &self.shared.shipped;
        (
            shipped.shipments.load(Ordering::Relaxed),
            shipped.batches.load(Ordering::Relaxed),
            shipped.statements.load(Ordering::Relaxed),
        )
    }

    /// Whether this host left the cluster.
    pub fn has_left(&self) -> bool {
        self.shared.left()
    }
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match url.parse::<tokio_postgres::Config>() {
        Ok(config) => {
            let ports = config.get_ports();
            let hosts: Vec<String> = config
                .get_hosts()
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let host = match h {
                        tokio_postgres::config::Host::Tcp(name) => name.clone(),
                        tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
                    };
                    // One port for every host, or one each.
                    match ports.get(i).or(ports.first().filter(|_| ports.len() == 1)) {
                        Some(port) => format!("{host}:{port}"),
                        None => host,
                    }
                })
                .collect();
            format!(
                "postgres://{}@{}/{}",
                config.get_user().unwrap_or(""),
                hosts.join(","),
                config.get_dbname().unwrap_or("")
            )
        }
        Err(_) => "(an invalid URL)".into(),
    }
}

/// Creates the tables if they are missing (one host at a time), and
/// returns the cluster's secret (made here if no host made it before).
async fn create_schema(shared: &Shared) -> Result<Vec<u8>, ClusterError> {
    let mut client = shared.client().await?;
    let current: bool = client.query_one(schema::CURRENT, &[]).await?.get(0);
    if current {
        return Ok(client
            .query_one("SELECT secret FROM burrow_secret WHERE id = 1", &[])
            .await?
            .get(0));
    }
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::SCHEMA_LOCK])
        .await?;
    // "already exists, skipping" is not news.
    tx.batch_execute("SET LOCAL client_min_messages = warning")
        .await?;
    tx.batch_execute(schema::SCHEMA).await?;
    let mut fresh = vec![0u8; SECRET_BYTES];
    getrandom::fill(&mut fresh)
        .map_err(|e| ClusterError::Unavailable(format!("no random bytes for a secret: {e}")))?;
    tx.execute(
        "INSERT INTO burrow_secret (id, secret) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
        &[&fresh],
    )
    .await?;
    let secret: Vec<u8> = tx
        .query_one("SELECT secret FROM burrow_secret WHERE id = 1", &[])
        .await?
        .get(0);
    tx.commit().await?;
    for upgrade in schema::UPGRADES {
        client
            .batch_execute(&format!(
                "SET client_min_messages = warning; {upgrade}; RESET client_min_messages"
            ))
            .await?;
    }
    Ok(secret)
}

/// The length of the cluster's secret.
const SECRET_BYTES: usize = 32;

impl LeaseSlot {
    /// Forgets the lease held of this instance (it is void); a local copy
    /// that was current stays known as such.
    pub fn forget_lease(&self) {
        let mut state = self.state();
        if let Some(held) = state.held.take()
            && held.current
        {
            state.known = Some((held.written_epoch, held.version));
        }
    }

    /// The local copy is no longer the replicated one (a commit of it was
    /// not shipped): the lease is forgotten too, so that the next use
    /// takes it anew and restores the copy.
    pub fn diverged(&self) {
        let mut state = self.state();
        state.held = None;
        state.known = None;
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_redacted_url_keeps_hosts_ports_user_and_database_but_no_password() {
        assert_eq!(
            redact("postgres://burrow:secret@db.example:6543/actors"),
            "postgres://burrow@db.example:6543/actors"
        );
        assert_eq!(
            redact("postgres://u:p@a:1,b:2/d?sslmode=disable"),
            "postgres://u@a:1,b:2/d"
        );
        assert_eq!(redact("postgres://u@a/d"), "postgres://u@a:5432/d");
        assert_eq!(redact("no url"), "(an invalid URL)");
    }
}
