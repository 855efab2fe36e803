//! The judge model behind `llm_judge` and `semantic_match`: the runtime's configured
//! provider (or its cassettes) answering `eval::judge::Judge`, and the check that refuses
//! a suite using them on a runtime with no provider.

use super::{Choice, Live, Reply, cassette, choose, provider_message};
use crate::llm::settings::{OPENAI_DEFAULT_URL, ProviderSettings};
use serde_json::{Value, json};
use spyglass_eval::Suite;
use spyglass_eval::judge::{Answer, Judge, needs};

const NO_PROVIDER: &str = "start the runtime with --model-base-url URL, OPENAI_API_KEY or ANTHROPIC_API_KEY, or --model-replay DIR";

pub struct RuntimeJudge {
    settings: ProviderSettings,
}

impl RuntimeJudge {
    pub fn new(settings: &ProviderSettings) -> RuntimeJudge {
        RuntimeJudge {
            settings: settings.clone(),
        }
    }

    /// `judge_model`, else the first provider with a route (or a cassette to replay).
    fn verdict_model(&self) -> Result<Choice, String> {
        let s = &self.settings;
        let spec = match &s.judge_model {
            Some(spec) => spec.as_str(),
            None if s.openai.configured() || s.replay_dir.is_some() => "openai",
            None if s.anthropic.configured() => "anthropic",
            None => return Err(format!("llm_judge needs a model provider: {NO_PROVIDER}")),
        };
        choose(spec, s)?
            .ok_or_else(|| "judge_model names the scripted model, which cannot judge".to_owned())
    }

    fn embeddings_available(&self) -> bool {
        self.settings.openai.configured() || self.settings.replay_dir.is_some()
    }

    async fn embeddings(&self, texts: &[String]) -> Result<Vec<Vec<f64>>, String> {
        let body = json!({"model": self.settings.embedding_model, "input": texts});
        // Kept apart from chat exchanges in the cassette by its own top-level key.
        let keyed = json!({"embeddings": body});
        if let Some(dir) = &self.settings.replay_dir {
            let reply = cassette::replay(dir, "openai", &keyed)
                .map_err(|e| format!("semantic_match: {e}"))?;
            return serde_json::from_str(&reply.text)
                .map_err(|e| format!("semantic_match: the recorded vectors are unreadable: {e}"));
        }
        let client = reqwest::Client::builder()
            .timeout(self.settings.timeout)
            .build()
            .map_err(|e| e.to_string())?;
        let url = format!(
            "{}/embeddings",
            self.settings.openai.url(OPENAI_DEFAULT_URL)
        );
        let mut req = client.post(&url).json(&body);
        if let Some(key) = &self.settings.openai.key {
            req = req.bearer_auth(key.expose());
        }
        let response = req
            .send()
            .await
            .map_err(|e| format!("cannot reach openai at {url}: {e}"))?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            return Err(format!(
                "openai answered {status}: {}",
                provider_message(&text)
            ));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| format!("openai: {}", super::malformed(&format!("not JSON ({e})"))))?;
        let mut vectors = Vec::new();
        for item in answer["data"].as_array().into_iter().flatten() {
            let vector: Option<Vec<f64>> = item["embedding"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_f64).collect());
            vectors.push(
                vector.ok_or_else(|| super::malformed("an embedding is not a list of numbers"))?,
            );
        }
        if vectors.len() != texts.len() {
            return Err(format!(
                "openai: {}",
                super::malformed(&format!(
                    "{} embeddings for {} texts",
                    vectors.len(),
                    texts.len()
                ))
            ));
        }
        if let Some(dir) = &self.settings.record_dir {
            let reply = Reply {
                text: Value::from(vectors.clone()).to_string(),
                calls: Vec::new(),
                usage: None,
                finish: "embeddings".to_owned(),
            };
            cassette::record(dir, "openai", 0, &keyed, &reply)?;
        }
        Ok(vectors)
    }
}

impl Judge for RuntimeJudge {
    fn complete<'a>(&'a self, prompt: &'a str) -> Answer<'a, String> {
        Box::pin(async move {
            let choice = self.verdict_model()?;
            let mut live = Live::for_prompt(&self.settings, choice, prompt)?;
            let step = live.answer(0, None).await?;
            Ok(step.text.unwrap_or_default())
        })
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> Answer<'a, Vec<Vec<f64>>> {
        Box::pin(self.embeddings(texts))
    }
}

/// A suite using `llm_judge` or `semantic_match` on a runtime that cannot answer them is
/// refused before it runs, naming the suite, the case and what to configure.
pub fn check_suites(suites: &[Suite], settings: &ProviderSettings) -> Result<(), String> {
    let judge = RuntimeJudge::new(settings);
    let (verdicts, semantic) = needs(suites);
    if let Some((suite, case)) = verdicts
        && let Err(why) = judge.verdict_model()
    {
        return Err(format!(
            "suite `{suite}` case `{case}` uses llm_judge, which this runtime cannot answer: {why}"
        ));
    }
    if let Some((suite, case)) = semantic
        && !judge.embeddings_available()
    {
        return Err(format!(
            "suite `{suite}` case `{case}` uses semantic_match, which needs an OpenAI-compatible embeddings route this runtime does not have: {NO_PROVIDER}"
        ));
    }
    Ok(())
}
