//! The `burrow` command: parses the command line and runs it.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = burrow::cli::Cli::parse();
    burrow::cli::install_logging(cli.log_format);
    burrow::cli::run(cli).await
}
