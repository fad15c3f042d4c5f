//! The host as guest code sees it: the instance layer's `OtherActors`,
//! implemented here, at the top, so that nothing below names the host.

use std::sync::{Arc, Weak};

use crate::address::Address;
use crate::background::Background;
use crate::error::Error;
use crate::instance::outside::{OtherActors, Pending};

use super::Host;
use super::route::Forwarder;

/// The host as guest code sees it: calls and sends to other instances,
/// for as long as the host runs.
pub(super) struct GuestLink(Weak<Background>, Arc<Forwarder>);

impl GuestLink {
    pub(super) fn new(work: &Arc<Background>, forwarder: Arc<Forwarder>) -> GuestLink {
        GuestLink(Arc::downgrade(work), forwarder)
    }

    fn host(&self) -> Result<Host, Error> {
        let work = self.0.upgrade().ok_or(Error::ShuttingDown)?;
        Ok(Host {
            core: work.core.clone(),
            work,
            forwarder: self.1.clone(),
        })
    }
}

impl OtherActors for GuestLink {
    fn call<'a>(
        &'a self,
        chain: Vec<Address>,
        actor: &'a str,
        key: &'a str,
        action: &'a str,
        args: &'a str,
    ) -> Pending<'a, String> {
        Box::pin(async move {
            self.host()?
                .call_on_chain(chain, actor, key, action, args)
                .await
        })
    }

    fn send<'a>(
        &'a self,
        actor: &'a str,
        key: &'a str,
        event_type: &'a str,
        payload: &'a str,
        priority: i32,
        group: Option<String>,
    ) -> Pending<'a, i64> {
        Box::pin(async move {
            let options = crate::SendOptions {
                priority,
                group,
                wait: None,
            };
            let outcome = self
                .host()?
                .send(actor, key, event_type, payload, options)
                .await?;
            Ok(outcome.id())
        })
    }
}
