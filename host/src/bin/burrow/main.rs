//! The `burrow` command: parses the command line and runs it, with the
//! benchmark workloads of `burrow bench`, which are part of this binary
//! and not of the library.

mod bench;

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = burrow::cli::Cli::parse();
    burrow::cli::install_logging(cli.log_format);
    burrow::cli::run(cli, bench::run).await
}
