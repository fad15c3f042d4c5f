//! W8: workflow steps that reach the world. Uses the manifest's `stepper`
//! actor, allowed (for this run) the address of a small HTTP server that
//! this process starts on 127.0.0.1 and that answers every request with
//! `{"ok":true}`.
//!
//! - Sequential: one workflow of N steps, each POSTing its number (with
//!   its idempotency key) and counting in the database once answered;
//!   µs per step. Beside it, in the same run: the same workflow without
//!   the request (a W5 step), and the floor, the same POST made by hyper's
//!   client from this process, on one kept-alive connection as the host
//!   keeps its own (`capability/http/pool.rs`), and on a new connection
//!   each time.
//! - Parallel: 64 such workflows at once; steps/s, beside the floor's
//!   rate with 64 clients at once, each on its kept-alive connection.

use std::convert::Infallible;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::workflow::completed;
use burrow::config::HostConfig;
use burrow::host::Host;
use burrow::manifest::ActorSpec;
use burrow::outbound::Allowed;

/// Workflows at once in the parallel part.
const PARALLEL: usize = 64;

/// Starts the server; returns its address. It stops with the runtime.
async fn server() -> Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    |request: hyper::Request<hyper::body::Incoming>| async move {
                        let _ = request.into_body().collect().await;
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                            br#"{"ok":true}"#,
                        ))))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(address)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(address: std::net::SocketAddr) -> Result<Sender> {
    let stream = tokio::net::TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One POST like a step's, on `sender`; fails unless answered 200.
async fn post(sender: &mut Sender, address: std::net::SocketAddr, i: usize) -> Result<()> {
    let request = hyper::Request::post("/w8")
        .header(hyper::header::HOST, address.to_string())
        .header("idempotency-key", "0123456789abcdef0123456789abcdef")
        .header(hyper::header::CONTENT_LENGTH, i.to_string().len())
        .body(Full::new(Bytes::from(i.to_string())))?;
    sender.ready().await?;
    let answer = sender.send_request(request).await?;
    if answer.status() != 200 {
        bail!("the server answered {}", answer.status());
    }
    answer.into_body().collect().await?;
    Ok(())
}

/// The floor: `n` POSTs one after another, on a new connection each
/// (`fresh`) or on one; µs per request.
async fn floor_sequential(address: std::net::SocketAddr, n: usize, fresh: bool) -> Result<f64> {
    let mut sender = connect(address).await?;
    let begun = Instant::now();
    for i in 0..n {
        if fresh {
            sender = connect(address).await?;
        }
        post(&mut sender, address, i).await?;
    }
    Ok(begun.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// The floor: `PARALLEL` clients, `each` POSTs each on its kept-alive
/// connection; requests per second.
async fn floor_parallel(address: std::net::SocketAddr, each: usize) -> Result<f64> {
    let begun = Instant::now();
    let clients: Vec<_> = (0..PARALLEL)
        .map(|_| {
            tokio::spawn(async move {
                let mut sender = connect(address).await?;
                for i in 0..each {
                    post(&mut sender, address, i).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for client in clients {
        client.await??;
    }
    Ok((PARALLEL * each) as f64 / begun.elapsed().as_secs_f64())
}

/// One workflow of `steps` steps, POSTing to `url` if given; µs per step.
async fn workflow(
    host: &Host,
    actor: &str,
    key: &str,
    steps: usize,
    url: Option<&str>,
) -> Result<f64> {
    let plan = json!({"steps": steps, "post": url});
    let begun = Instant::now();
    host.create(actor, key, &plan.to_string()).await?;
    completed(host, actor, key).await?;
    Ok(begun.elapsed().as_secs_f64() * 1e6 / steps as f64)
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Runs W8 on the stepper `spec`: `steps` sequential steps, and
/// `PARALLEL` workflows of `steps / 10` steps each.
pub(super) async fn run(config: HostConfig, spec: &ActorSpec, steps: usize) -> Result<Value> {
    let address = server().await?;
    let url = format!("http://{address}/w8");
    let mut spec = spec.clone();
    spec.options.http = Allowed::parse(&[format!("http://{address}")])
        .map_err(anyhow::Error::msg)
        .context("the server's authority")?;
    let actor = spec.name.clone();
    let host = Host::start(config, std::slice::from_ref(&spec)).await?;
    // Warm up: the component, the connection path, the server.
    workflow(&host, &actor, "warm-up", 10, Some(&url)).await?;
    floor_sequential(address, 100, true).await?;

    let floor_fresh = floor_sequential(address, steps, true).await?;
    let floor_kept = floor_sequential(address, steps, false).await?;
    let w5_step = workflow(&host, &actor, "w8-no-request", steps, None).await?;
    let w8_step = workflow(&host, &actor, "w8", steps, Some(&url)).await?;
    let count = host.call(&actor, "w8", "count", "[]").await?;
    if count != steps.to_string() {
        bail!("the W8 workflow counted {count}, not {steps}");
    }

    let each = (steps / 10).max(1);
    let floor_rate = floor_parallel(address, each).await?;
    let begun = Instant::now();
    let plan = json!({"steps": each, "post": url}).to_string();
    for i in 0..PARALLEL {
        host.create(&actor, &format!("w8-parallel-{i}"), &plan)
            .await?;
    }
    for i in 0..PARALLEL {
        completed(&host, &actor, &format!("w8-parallel-{i}")).await?;
    }
    let w8_rate = (PARALLEL * each) as f64 / begun.elapsed().as_secs_f64();
    host.shutdown().await;

    Ok(json!({
        "steps": steps,
        "us_per_step_with_request": round(w8_step),
        "us_per_step_without_request": round(w5_step),
        "floor_us_per_request_new_connection": round(floor_fresh),
        "floor_us_per_request_kept_alive": round(floor_kept),
        "step_with_request_to_floor_plus_step": round(w8_step / (floor_kept + w5_step)),
        "parallel_workflows": PARALLEL,
        "parallel_steps_each": each,
        "parallel_steps_per_sec": w8_rate.round(),
        "floor_parallel_requests_per_sec": floor_rate.round(),
        "floor_parallel_to_parallel_steps": round(floor_rate / w8_rate),
    }))
}
