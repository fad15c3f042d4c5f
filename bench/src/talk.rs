//! W6 and W7: actors talking.
//!
//! - W6, calls between actors, on the manifest's `account` actor: a
//!   `deposit(1)` called from outside (in-process), against a
//!   `transfer("dst", 1)` called from outside, which reads and updates its
//!   own balance and then calls `deposit(1)` on another account. The
//!   difference is what one call between actors adds (with the transfer's
//!   own two statements).
//! - W7, events, on the manifest's `chat-room` actor: 100 clients connected
//!   over WebSockets to one room (through the HTTP API in this process);
//!   messages are posted one after another, and every client counts the
//!   `message` events it receives. Events delivered per second, from the
//!   first post until the last client got the last message.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::{Latencies, timed};
use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::ActorSpec;

/// W6: a call from outside against one that makes a call between actors.
pub(super) async fn calls(config: HostConfig, spec: &ActorSpec, ops: usize) -> Result<Value> {
    let host = Host::start(config, std::slice::from_ref(spec)).await?;
    let funds = format!("[{}]", ops + 1);
    host.call("account", "src", "deposit", &funds).await?;
    host.call("account", "dst", "deposit", "[1]").await?;
    let outside = timed(ops, async |_| {
        Ok(host
            .call("account", "dst", "deposit", "[1]")
            .await
            .map(drop)?)
    })
    .await?;
    let transfer = timed(ops, async |_| {
        Ok(host
            .call("account", "src", "transfer", r#"["dst", 1]"#)
            .await
            .map(drop)?)
    })
    .await?;
    let balance = host.call("account", "dst", "balance", "[]").await?;
    let expected = 2 * ops + 1;
    host.shutdown().await;
    if balance != expected.to_string() {
        bail!("the destination's balance is {balance}, not {expected}");
    }
    let extra = transfer.mean().saturating_sub(outside.mean());
    Ok(json!({
        "deposit_from_outside": outside.to_json(),
        "transfer_with_one_call_between_actors": transfer.to_json(),
        "added_by_the_call_between_actors_us": super::micros(extra),
        "ratio": ratio(&transfer, &outside),
    }))
}

fn ratio(a: &Latencies, b: &Latencies) -> f64 {
    (a.mean().as_secs_f64() / b.mean().as_secs_f64() * 100.0).round() / 100.0
}

/// W7: events delivered per second to `clients` connected clients.
pub(super) async fn events(
    config: HostConfig,
    spec: &ActorSpec,
    clients: usize,
    messages: usize,
) -> Result<Value> {
    let host = Host::start(config, std::slice::from_ref(spec)).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(burrow::http::serve_on(host.clone(), listener, async {
        let _ = stopped.await;
    }));
    let client = burrow::client::Client::new(&url);
    let room = client.actor("chat-room", "w7");
    let mut listeners = Vec::with_capacity(clients);
    for i in 0..clients {
        let params = json!({ "name": format!("client-{i}") });
        let mut subscription = room.subscribe(Some(&params)).await?;
        listeners.push(tokio::spawn(async move {
            let mut received = 0;
            let mut lagged = 0;
            while received < messages {
                match subscription.next().await {
                    Some(Ok(burrow::client::Event::Message { name, .. })) if name == "message" => {
                        received += 1
                    }
                    Some(Ok(burrow::client::Event::Lagged(missed))) => {
                        lagged += missed as usize;
                        received += missed as usize;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(anyhow::anyhow!("client {i}: {e}")),
                    None => bail!("client {i}: the server closed the connection"),
                }
            }
            Ok((Instant::now(), lagged))
        }));
    }
    let begun = Instant::now();
    for m in 0..messages {
        let args = json!(["bench", format!("message {m}")]).to_string();
        host.call("chat-room", "w7", "post", &args).await?;
    }
    let posted = begun.elapsed();
    let mut last = begun;
    let mut lagged = 0;
    for listener in listeners {
        let (at, missed) = tokio::time::timeout(Duration::from_secs(120), listener).await???;
        last = last.max(at);
        lagged += missed;
    }
    let elapsed = last - begun;
    let delivered = clients * messages - lagged;
    let _ = stop.send(());
    server.await??;
    Ok(json!({
        "clients": clients,
        "messages": messages,
        "events_delivered": delivered,
        "events_missed_by_slow_clients": lagged,
        "events_per_sec": (delivered as f64 / elapsed.as_secs_f64()).round(),
        "posts_per_sec": (messages as f64 / posted.as_secs_f64()).round(),
        "elapsed_ms": (elapsed.as_secs_f64() * 1e4).round() / 10.0,
    }))
}
