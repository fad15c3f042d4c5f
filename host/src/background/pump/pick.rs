//! Picking due events by the instance's policy: never more than the free
//! calls, never more of a group than its concurrency allows (counting the
//! events in flight and those waiting for their retry), and never an event
//! in flight. Fifo, lifo and random pick from group heads or by one scan;
//! a custom policy asks the actor's selector.

use std::collections::HashMap;

use super::Run;
use crate::cell::Origin;
use crate::config::MAX_SELECT_EVENTS;
use crate::error::Error;
use crate::storage::{HostTables, QueueMode, QueuePolicy, QueuedEvent};

/// Up to this many groups with pending events, events are picked from the
/// head of each group; past it, by one scan in the mode's order.
const MAX_GROUPS_BY_HEAD: usize = 64;

impl Run {
    /// Picks up to `free` due events that the policy allows now; none
    /// while the instance is paused.
    pub(super) async fn pick(
        &mut self,
        policy: &QueuePolicy,
        now: i64,
        free: usize,
    ) -> Result<Vec<QueuedEvent>, Error> {
        if self
            .reader()
            .pause()
            .is_paused()
            .map_err(|e| self.storage(e))?
        {
            return Ok(Vec::new());
        }
        let per_group = policy.per_group();
        let mut busy = self
            .reader()
            .queue()
            .waiting_for_retry(now)
            .map_err(|e| self.storage(e))?;
        for group in self.in_flight.values() {
            *busy.entry(group.clone()).or_default() += 1;
        }
        let mut skip_ids: Vec<i64> = self.in_flight.keys().copied().collect();
        let mut full: Vec<String> = busy
            .iter()
            .filter(|(_, n)| **n >= per_group)
            .map(|(g, _)| g.clone())
            .collect();
        if policy.mode == QueueMode::Custom {
            return self
                .pick_custom(now, free, per_group, busy, skip_ids, full)
                .await;
        }
        let groups = self
            .reader()
            .queue()
            .groups(MAX_GROUPS_BY_HEAD + 1)
            .map_err(|e| self.storage(e))?;
        if groups.len() <= MAX_GROUPS_BY_HEAD {
            return self.pick_by_group(policy, now, free, &busy, &skip_ids, &groups);
        }
        let mut picked = Vec::new();
        while picked.len() < free {
            let groups: Vec<&str> = full.iter().map(String::as_str).collect();
            let batch = self
                .reader()
                .queue()
                .due_events(policy.mode, now, &skip_ids, &groups, free - picked.len())
                .map_err(|e| self.storage(e))?;
            if batch.is_empty() {
                break;
            }
            for event in batch {
                let group = event.group.clone().unwrap_or_default();
                let count = busy.entry(group.clone()).or_default();
                *count += 1;
                skip_ids.push(event.id);
                picked.push(event);
                if *count >= per_group {
                    // Later events of this batch may be of this group:
                    // ask again without it.
                    full.push(group);
                    break;
                }
            }
        }
        Ok(picked)
    }

    /// Picks from the head of each group that has room, then merges the
    /// heads in the mode's order. Costs one index lookup per group, however
    /// long the queue.
    fn pick_by_group(
        &self,
        policy: &QueuePolicy,
        now: i64,
        free: usize,
        busy: &HashMap<String, usize>,
        skip_ids: &[i64],
        groups: &[String],
    ) -> Result<Vec<QueuedEvent>, Error> {
        let per_group = policy.per_group();
        let mut heads = Vec::new();
        for group in groups {
            let room = per_group.saturating_sub(busy.get(group).copied().unwrap_or(0));
            if room == 0 {
                continue;
            }
            let head = self
                .reader()
                .queue()
                .group_head(policy.mode, group, now, skip_ids, room.min(free))
                .map_err(|e| self.storage(e))?;
            heads.extend(head);
        }
        match policy.mode {
            QueueMode::Lifo => heads.sort_by_key(|(e, _)| {
                (
                    e.priority,
                    std::cmp::Reverse(e.created_at),
                    std::cmp::Reverse(e.id),
                )
            }),
            QueueMode::Random => heads.sort_by_key(|(e, random)| (e.priority, *random)),
            QueueMode::Fifo | QueueMode::Custom => {
                heads.sort_by_key(|(e, _)| (e.priority, e.created_at, e.id))
            }
        }
        Ok(heads.into_iter().take(free).map(|(e, _)| e).collect())
    }

    #[allow(clippy::too_many_arguments)]
    async fn pick_custom(
        &mut self,
        now: i64,
        free: usize,
        per_group: usize,
        mut busy: HashMap<String, usize>,
        skip_ids: Vec<i64>,
        full: Vec<String>,
    ) -> Result<Vec<QueuedEvent>, Error> {
        let groups: Vec<&str> = full.iter().map(String::as_str).collect();
        let offered = self
            .reader()
            .queue()
            .due_events(
                QueueMode::Custom,
                now,
                &skip_ids,
                &groups,
                MAX_SELECT_EVENTS,
            )
            .map_err(|e| self.storage(e))?;
        if offered.is_empty() {
            return Ok(Vec::new());
        }
        let chosen = self
            .work
            .core
            .with_cell(self.actor(), self.key(), Origin::MustExist, async |cell| {
                cell.select(&offered).await
            })
            .await?;
        let mut by_id: HashMap<i64, QueuedEvent> = offered.into_iter().map(|e| (e.id, e)).collect();
        if let Some(bad) = chosen.iter().find(|id| !by_id.contains_key(id)) {
            return Err(Error::Failed {
                actor: self.actor().into(),
                key: self.key().into(),
                during: "queue selector".into(),
                code: "unknown-event".into(),
                message: format!(
                    "the selector returned id {bad}, which is not one of the pending events \
                     it was given; nothing was claimed"
                ),
            });
        }
        let mut picked = Vec::new();
        for id in chosen {
            if picked.len() == free {
                break;
            }
            let Some(event) = by_id.remove(&id) else {
                continue; // named twice
            };
            let count = busy
                .entry(event.group.clone().unwrap_or_default())
                .or_default();
            if *count < per_group {
                *count += 1;
                picked.push(event);
            }
        }
        Ok(picked)
    }
}
