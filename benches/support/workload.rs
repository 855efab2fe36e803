//! Observer frames as a runtime would send them: `session.created` for every session, then
//! `tool.called` and `agent.step.completed` (one call each, about 550 bytes) spread over
//! the busiest sessions. Text is made on demand so a million frames never sit in memory.

pub const TS: &str = "2026-11-22T21:43:31.000Z";

/// Which frames, in which order. Frame `i` is `text(i)`; seqs start at `seq_base + 1`.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Session numbers start here (a second workload can follow a first one).
    pub session_base: usize,
    pub sessions: usize,
    /// The newest `busy` sessions get the payload frames, round robin.
    pub busy: usize,
    /// `tool.called` / `agent.step.completed` frames after the `session.created` ones.
    pub payload: usize,
    pub seq_base: u64,
    /// When non-zero, sessions come `wave` at a time, each wave created and then fed its
    /// frames round robin before the next starts (with `busy == sessions`).
    pub wave: usize,
}

impl Workload {
    /// Every session busy: `per_session` payload frames each.
    pub fn even(sessions: usize, per_session: usize) -> Workload {
        Workload {
            session_base: 0,
            sessions,
            busy: sessions,
            payload: sessions * per_session,
            seq_base: 0,
            wave: 0,
        }
    }

    /// The workload that comes after this one: fresh sessions and seqs.
    pub fn next(&self) -> Workload {
        Workload {
            session_base: self.session_base + self.sessions,
            seq_base: self.seq_base + self.len() as u64,
            ..*self
        }
    }

    pub fn len(&self) -> usize {
        self.sessions + self.payload
    }

    pub fn session_id(&self, n: usize) -> String {
        format!("ses_{:06}", self.session_base + n)
    }

    pub fn text(&self, i: usize) -> String {
        let seq = self.seq_base + i as u64 + 1;
        if self.wave > 0 && self.busy == self.sessions && self.sessions > 0 {
            let per_session = self.payload / self.sessions;
            let per_wave = self.wave * (1 + per_session);
            let (w, r) = (i / per_wave, i % per_wave);
            if r < self.wave {
                return session_created(seq, &self.session_id(w * self.wave + r));
            }
            let j = r - self.wave;
            let sid = self.session_id(w * self.wave + j % self.wave);
            return payload(seq, &sid, j / self.wave);
        }
        if i < self.sessions {
            return session_created(seq, &self.session_id(i));
        }
        let j = i - self.sessions;
        let busy = self.busy.clamp(1, self.sessions.max(1));
        let n = self.sessions - busy + j % busy;
        let k = j / busy;
        payload(seq, &self.session_id(n), k)
    }

    pub fn texts(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.text(i)).collect()
    }
}

/// The `k`th payload frame of a session: three runtime calls, then an agent step that
/// carries a call of its own.
pub fn payload(seq: u64, sid: &str, k: usize) -> String {
    if k % 4 == 3 {
        step_completed(seq, sid, (k / 4) as u32 + 1, k)
    } else {
        tool_called(seq, sid, k)
    }
}

pub fn session_created(seq: u64, sid: &str) -> String {
    format!(
        r#"{{"kind":"session.created","seq":{seq},"ts":"{TS}","sessionId":"{sid}","userId":"user_{seq}","servers":["nuvem-fiscal","asaas"],"project":"default","mocks":[{{"tool":"nuvem-fiscal/create_nfe","mode":"stateful","entries":100}},{{"tool":"asaas/create_payment","mode":"static","entries":1}}]}}"#
    )
}

pub fn tool_called(seq: u64, sid: &str, k: usize) -> String {
    let ms = k % 1000;
    format!(
        r#"{{"kind":"tool.called","seq":{seq},"ts":"{TS}","sessionId":"{sid}","callId":"call_{sid}_{k:05}","tool":"nuvem-fiscal/create_nfe","input":{{"value":4200,"customer":"cus_{k}"}},"outcome":{{"result":{{"id":"nfe_{k}","status":"authorized","number":{k}}}}},"startedAt":"2026-11-22T21:43:30.{ms:03}Z","duration":3.5,"counter":{{"consumed":{k},"total":100}},"source":"execute"}}"#
    )
}

pub fn step_completed(seq: u64, sid: &str, iteration: u32, k: usize) -> String {
    format!(
        r#"{{"kind":"agent.step.completed","seq":{seq},"ts":"{TS}","sessionId":"{sid}","agentName":"billing-agent","model":"claude-sonnet","provider":"anthropic","iteration":{iteration},"step":{{"iteration":{iteration},"model":"claude-sonnet","tokens":{{"prompt":812,"completion":64,"total":876}},"finishReason":"tool_calls","toolCalls":[{{"id":"tc_{sid}_{k:05}","name":"asaas/create_payment","args":{{"customer":"cus_{k}","value":4200}},"result":{{"id":"pay_{k}","status":"PENDING"}},"duration":12.5,"needsApproval":false}}]}},"tokens":{{"prompt":812,"completion":64,"total":876}},"duration":{iteration}40.0,"streaming":false}}"#
    )
}
