//! `spyglass store`: operating a Postgres store from the command line: `migrate` creates
//! or brings its schema up to this version, `status` says which version it has and what it holds.

use super::{LogTo, RoleError, start_logging};
use crate::store::postgres::{self, SchemaStatus};
#[cfg(feature = "postgres")]
use crate::store::postgres::{PgSettings, PgStore};

/// The flags of `spyglass store`: which operation.
#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

/// `spyglass store`'s subcommands.
// Doc comments here are the --help text: backticks would print there as-is.
#[expect(clippy::doc_markdown)]
#[derive(clap::Subcommand, Debug, Clone)]
pub enum StoreCommand {
    /// Create the spyglass schema in the database, or migrate it to this version; prints
    /// the version. Waits (saying so) while the database is unreachable.
    Migrate {
        /// The database: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
        #[arg(long, value_name = "URL", required = true)]
        store: String,
    },
    /// Print the database's schema version, whether this spyglass supports it, and how
    /// many events and sessions it holds. Exit status 1 when it has no spyglass schema
    /// or a newer one, or cannot be reached.
    Status {
        /// The database: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
        #[arg(long, value_name = "URL", required = true)]
        store: String,
    },
}

/// Runs the operation asked for.
pub async fn run(args: StoreArgs) -> Result<(), RoleError> {
    start_logging(LogTo::File, false)?;
    match args.command {
        StoreCommand::Migrate { store } => migrate(&store).await,
        StoreCommand::Status { store } => status(&store).await,
    }
}

/// Only a Postgres store is operated this way (a `SQLite` file migrates when a runtime
/// opens it), and a URL that cannot name one is bad input.
fn postgres_url(url: &str) -> Result<(), RoleError> {
    if !postgres::is_url(url) {
        return Err(RoleError::Usage(format!(
            "--store {} is not a postgres:// URL; `spyglass store` operates a Postgres store (a SQLite file is migrated by the runtime that opens it)",
            postgres::shown_url(url)
        )));
    }
    #[cfg(feature = "postgres")]
    {
        postgres::check_url(url).map_err(|err| RoleError::Usage(err.to_string()))
    }
    #[cfg(not(feature = "postgres"))]
    {
        Err(RoleError::Usage(format!(
            "--store {}: this spyglass was built without Postgres support (the `postgres` feature, on by default); build it with that feature to operate a Postgres store",
            postgres::shown_url(url)
        )))
    }
}

/// Without Postgres support: `--store` is refused, saying why.
#[cfg(not(feature = "postgres"))]
#[expect(
    clippy::unused_async,
    reason = "the same signature as with the feature"
)]
pub async fn migrate(url: &str) -> Result<(), RoleError> {
    postgres_url(url)
}

/// Without Postgres support: `--store` is refused, saying why.
#[cfg(not(feature = "postgres"))]
#[expect(
    clippy::unused_async,
    reason = "the same signature as with the feature"
)]
pub async fn status(url: &str) -> Result<(), RoleError> {
    postgres_url(url)
}

/// Creates or migrates the schema, waiting (saying so on stderr) while the database is
/// unreachable, as `serve` does at start; prints the version it is at.
#[cfg(feature = "postgres")]
pub async fn migrate(url: &str) -> Result<(), RoleError> {
    postgres_url(url)?;
    let shown = postgres::shown_url(url);
    let on_wait = |reason: &str| {
        eprintln!(
            "spyglass store migrate: waiting for the store at {}: {}",
            crate::sanitize::sanitize_text(&shown),
            crate::sanitize::sanitize_text(reason)
        );
    };
    let settings = PgSettings {
        pool_size: 1,
        replica: format!("migrate-{}", std::process::id()),
    };
    // What it was, if it answers now (else the wait below says why, and what it was is
    // not known).
    let before = PgStore::inspect(url).await.map(|s| s.version);
    let store = PgStore::connect(url, settings, &on_wait).await?;
    let status = store.status().await?;
    let now = status.version.unwrap_or(0);
    let what = match before {
        Ok(None) => " (created)".to_owned(),
        Ok(Some(v)) if v == now => " (already)".to_owned(),
        Ok(Some(v)) => format!(" (migrated from version {v})"),
        Err(_) => String::new(),
    };
    println!(
        "{}: schema version {now}{what}",
        crate::sanitize::sanitize_text(&status.shown)
    );
    Ok(())
}

/// Prints the schema version and what the store holds; exit 1 when there is no spyglass
/// schema or a newer one. Asks once: an unreachable database is an error, not a wait.
#[cfg(feature = "postgres")]
pub async fn status(url: &str) -> Result<(), RoleError> {
    postgres_url(url)?;
    let status = PgStore::inspect(url).await?;
    print!("{}", render(&status));
    match status.version {
        None => Err(RoleError::Schema(format!(
            "no spyglass schema in {}; create it with `spyglass store migrate --store URL` (a runtime started on it creates it too)",
            status.shown
        ))),
        Some(found) if found > status.supported => Err(RoleError::Schema(format!(
            "{} has schema version {found}, newer than this spyglass knows ({}); run a newer spyglass",
            status.shown, status.supported
        ))),
        Some(_) => Ok(()),
    }
}

/// The status as lines, names aligned.
pub fn render(status: &SchemaStatus) -> String {
    let version = status
        .version
        .map_or_else(|| "none".to_owned(), |v| v.to_string());
    let supported = match status.version {
        None => "no",
        Some(v) if v > status.supported => "no (newer)",
        Some(v) if v < status.supported => "yes (migrates when opened)",
        Some(_) => "yes",
    };
    format!(
        "store      {}\nschema     {version}\nsupported  {supported} (this spyglass: {})\nevents     {}\nsessions   {}\n",
        crate::sanitize::sanitize_text(&status.shown),
        status.supported,
        status.events,
        status.sessions
    )
}
