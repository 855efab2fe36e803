//! Model provider settings for the runtime: base URLs and keys (from flags and the
//! environment, never from a session body), cassette directories, retries and prices.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The public `OpenAI` route, used when only `OPENAI_API_KEY` is given.
pub const OPENAI_DEFAULT_URL: &str = "https://api.openai.com/v1";
/// The public Anthropic route, used when only `ANTHROPIC_API_KEY` is given.
pub const ANTHROPIC_DEFAULT_URL: &str = "https://api.anthropic.com/v1";

/// A provider key: its `Debug` and `Display` are masked, so a settings dump, a log line
/// or a panic message never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&spyglass_protocol::mask::mask_secret(&self.0))
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Dollars per million tokens, by direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

/// One provider's route: where it answers and the key it wants (none for a local server).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderRoute {
    pub base_url: Option<String>,
    pub key: Option<ApiKey>,
}

impl ProviderRoute {
    /// Configured: a base URL or a key was given.
    pub fn configured(&self) -> bool {
        self.base_url.is_some() || self.key.is_some()
    }

    /// The base URL without its trailing slash, `default` when only a key was given.
    pub fn url(&self, default: &str) -> String {
        self.base_url
            .as_deref()
            .unwrap_or(default)
            .trim_end_matches('/')
            .to_owned()
    }
}

/// What the runtime may use to answer `send` with a real model.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub openai: ProviderRoute,
    pub anthropic: ProviderRoute,
    /// The model a session naming only `openai` gets.
    pub openai_model: String,
    pub anthropic_model: String,
    /// Model names a session may pick (`*` globs allowed); empty allows any.
    pub allowed_models: Vec<String>,
    /// `--model-record DIR`: every exchange is written here as a cassette entry.
    pub record_dir: Option<PathBuf>,
    /// `--model-replay DIR`: exchanges are served from here with no network.
    pub replay_dir: Option<PathBuf>,
    /// How long one model request may take, streaming included.
    pub timeout: Duration,
    /// Retries of a request answered 429 or 5xx (after the first try).
    pub max_retries: u32,
    /// The longest `retry-after` honoured; a longer one waits this long.
    pub max_retry_wait: Duration,
    /// `max_tokens` sent to providers that need one (Anthropic).
    pub max_output_tokens: u32,
    /// Model name to price. A run on a model not in it has no cost (never 0); eval
    /// results, whose `cost` `@gemstack/ai-sdk` makes a number, write 0 for it.
    pub prices: BTreeMap<String, Price>,
    /// The model `llm_judge` asks (`openai[:MODEL]`, `anthropic[:MODEL]`); `None` takes
    /// the first configured provider.
    pub judge_model: Option<String>,
    /// The `OpenAI`-compatible embeddings model `semantic_match` uses.
    pub embedding_model: String,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        Self {
            openai: ProviderRoute::default(),
            anthropic: ProviderRoute::default(),
            openai_model: "gpt-4o-mini".to_owned(),
            anthropic_model: "claude-3-5-haiku-latest".to_owned(),
            allowed_models: Vec::new(),
            record_dir: None,
            replay_dir: None,
            timeout: Duration::from_mins(1),
            max_retries: 2,
            max_retry_wait: Duration::from_secs(10),
            max_output_tokens: 1024,
            prices: BTreeMap::new(),
            judge_model: None,
            embedding_model: "text-embedding-3-small".to_owned(),
        }
    }
}

/// The `serve` flags about models, before the environment is read.
#[derive(Debug, Clone, Default)]
pub struct ProviderFlags {
    /// `--model-base-url URL` (the OpenAI-compatible route) or `PROVIDER=URL`; repeatable.
    pub base_urls: Vec<String>,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    /// `--model-prices FILE`: TOML, `[model-name] input = 0.15 output = 0.6`.
    pub prices: Option<PathBuf>,
    /// `--model-allow NAME`: models a session may pick (`*` globs); none allows any.
    pub allow: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderSettingsError {
    #[error("--model-base-url {0}: give URL, openai=URL or anthropic=URL")]
    BaseUrl(String),
    #[error("--model-record and --model-replay are exclusive: a run either records or replays")]
    RecordAndReplay,
    #[error("--model-prices {path}: {message}")]
    Prices { path: PathBuf, message: String },
}

impl ProviderSettings {
    /// Flags over the environment: `OPENAI_API_KEY`, `OPENAI_BASE_URL`,
    /// `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` (`lookup` reads one variable).
    pub fn resolve(
        flags: &ProviderFlags,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ProviderSettings, ProviderSettingsError> {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let mut settings = ProviderSettings {
            openai: ProviderRoute {
                base_url: var("OPENAI_BASE_URL"),
                key: var("OPENAI_API_KEY").map(ApiKey::new),
            },
            anthropic: ProviderRoute {
                base_url: var("ANTHROPIC_BASE_URL"),
                key: var("ANTHROPIC_API_KEY").map(ApiKey::new),
            },
            record_dir: flags.record.clone(),
            allowed_models: flags.allow.clone(),
            replay_dir: flags.replay.clone(),
            ..ProviderSettings::default()
        };
        if settings.record_dir.is_some() && settings.replay_dir.is_some() {
            return Err(ProviderSettingsError::RecordAndReplay);
        }
        for flag in &flags.base_urls {
            let (route, url) = match flag.split_once('=') {
                Some(("openai", url)) => (&mut settings.openai, url),
                Some(("anthropic", url)) => (&mut settings.anthropic, url),
                Some(_) => return Err(ProviderSettingsError::BaseUrl(flag.clone())),
                None => (&mut settings.openai, flag.as_str()),
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ProviderSettingsError::BaseUrl(flag.clone()));
            }
            route.base_url = Some(url.to_owned());
        }
        if let Some(path) = &flags.prices {
            let fail = |message: String| ProviderSettingsError::Prices {
                path: path.clone(),
                message,
            };
            let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
            settings.prices = toml::from_str(&text).map_err(|e| fail(e.to_string()))?;
            // A negative or non-finite price would make every cost it touches a lie.
            for (model, price) in &settings.prices {
                for (side, value) in [("input", price.input), ("output", price.output)] {
                    if !(value.is_finite() && value >= 0.0) {
                        return Err(fail(format!(
                            "[{model:?}] {side} = {value}: a price is a finite number of dollars per million tokens, 0 or more"
                        )));
                    }
                }
            }
        }
        Ok(settings)
    }

    /// The price of `tokens` on `model`, in dollars (0 when unpriced).
    pub fn cost(&self, model: &str, prompt: u64, completion: u64) -> f64 {
        self.priced(model, prompt, completion).unwrap_or(0.0)
    }

    /// The price of `tokens` on `model`, in dollars; `None` when the table has no price
    /// for it.
    pub fn priced(&self, model: &str, prompt: u64, completion: u64) -> Option<f64> {
        self.prices
            .get(model)
            .map(|p| (prompt as f64 * p.input + completion as f64 * p.output) / 1_000_000.0)
    }

    /// Why a run on `model` has no cost: the sentence the run summary and `max_cost`
    /// show.
    pub fn unpriced(model: &str) -> String {
        format!("no price for model `{model}` (--model-prices)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_environment_and_never_print() {
        let env = |name: &str| match name {
            "OPENAI_API_KEY" => Some("sk-test1234567890abcdef".to_owned()),
            _ => None,
        };
        let settings = ProviderSettings::resolve(&ProviderFlags::default(), env).unwrap();
        assert!(settings.openai.configured());
        assert!(!settings.anthropic.configured());
        let shown = format!("{settings:?}");
        assert!(!shown.contains("1234567890abcdef"), "{shown}");
        assert_eq!(settings.openai.url(OPENAI_DEFAULT_URL), OPENAI_DEFAULT_URL);
    }

    #[test]
    fn base_url_flags_name_their_provider() {
        let flags = ProviderFlags {
            base_urls: vec![
                "http://127.0.0.1:11434/v1/".to_owned(),
                "anthropic=http://127.0.0.1:9/v1".to_owned(),
            ],
            allow: vec!["llama3*".to_owned()],
            ..ProviderFlags::default()
        };
        let settings = ProviderSettings::resolve(&flags, |_| None).unwrap();
        assert_eq!(settings.allowed_models, ["llama3*"]);
        assert_eq!(
            settings.openai.url(OPENAI_DEFAULT_URL),
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(
            settings.anthropic.base_url.as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        for bad in ["gemini=http://x", "ftp://x", "openai=127.0.0.1"] {
            let flags = ProviderFlags {
                base_urls: vec![bad.to_owned()],
                ..ProviderFlags::default()
            };
            assert!(
                ProviderSettings::resolve(&flags, |_| None).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn record_and_replay_together_are_refused() {
        let flags = ProviderFlags {
            record: Some("a".into()),
            replay: Some("b".into()),
            ..ProviderFlags::default()
        };
        assert!(matches!(
            ProviderSettings::resolve(&flags, |_| None),
            Err(ProviderSettingsError::RecordAndReplay)
        ));
    }

    #[test]
    fn cost_follows_the_price_table() {
        let mut settings = ProviderSettings::default();
        settings.prices.insert(
            "gpt-4o-mini".to_owned(),
            Price {
                input: 0.15,
                output: 0.6,
            },
        );
        let cost = settings.cost("gpt-4o-mini", 1_000_000, 500_000);
        assert!((cost - 0.45).abs() < 1e-9, "{cost}");
        assert!(settings.cost("other", 10, 10).abs() < f64::EPSILON);
        assert_eq!(settings.priced("other", 10, 10), None);
    }

    #[test]
    fn a_price_table_with_a_negative_or_non_finite_price_is_refused() {
        let dir = std::env::temp_dir().join(format!("spyglass-prices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (text, word) in [
            ("[\"m\"]\ninput = -1.0\noutput = 0.5\n", "input = -1"),
            ("[\"m\"]\ninput = 1.0\noutput = nan\n", "output = NaN"),
            ("[\"m\"]\ninput = \"cheap\"\noutput = 1.0\n", "invalid type"),
        ] {
            let path = dir.join("prices.toml");
            std::fs::write(&path, text).unwrap();
            let flags = ProviderFlags {
                prices: Some(path.clone()),
                ..ProviderFlags::default()
            };
            let err = ProviderSettings::resolve(&flags, |_| None)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("--model-prices") && err.contains(word),
                "{err}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
