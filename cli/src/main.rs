//! The `burrow` command: parses the command line and runs it. The
//! library `burrow` does the work; the workloads of `burrow bench` come
//! from the crate `burrow-bench` (`bench/`), so that the library carries
//! none of them.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = burrow::cli::Cli::parse();
    burrow::cli::install_logging(cli.log_format);
    burrow::cli::run(cli, burrow_bench::run).await
}
