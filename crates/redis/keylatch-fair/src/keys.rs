//! The keys and channels of one fair lock name.

use std::sync::Arc;

use keylatch_redis::{LuaScript, ScriptCall, prefixed, suffixed};

/// The names of one fair lock: Redisson's hash `name`, queue list, score zset and wake-up
/// channel prefix; keylatch's waiter deadline zset and grant hash; the (opt-in) fencing
/// counter.
#[derive(Debug)]
pub(crate) struct Keys {
    pub(crate) name: Arc<str>,
    pub(crate) queue: String,
    pub(crate) timeouts: String,
    pub(crate) channel: String,
    /// keylatch waiters' liveness deadlines, `{name}:keylatch_waiters` (Redisson never reads it).
    pub(crate) waiters: String,
    /// keylatch waiters' grant offers and marks, `{name}:keylatch_grants` (Redisson never
    /// reads it; see `hand_off` in `lua/prelude.lua`).
    pub(crate) grants: String,
    pub(crate) token: String,
}

impl Keys {
    pub(crate) fn new(name: &str) -> Keys {
        Keys {
            name: Arc::from(name),
            queue: prefixed("redisson_lock_queue", name),
            timeouts: prefixed("redisson_lock_timeout", name),
            channel: prefixed("redisson_lock__channel", name),
            waiters: suffixed(name, "keylatch_waiters"),
            grants: suffixed(name, "keylatch_grants"),
            token: prefixed("redisson_lock_token", name),
        }
    }

    /// A call of `script` with the seven keys every queue script takes (see `lua/prelude.lua`).
    pub(crate) fn call(&self, script: &'static LuaScript) -> ScriptCall {
        script
            .call()
            .key(&*self.name)
            .key(self.queue.as_str())
            .key(self.timeouts.as_str())
            .key(self.channel.as_str())
            .key(self.waiters.as_str())
            .key(self.grants.as_str())
            .key(self.token.as_str())
    }

    /// The wake-up channel of one waiter: `redisson_lock__channel:{name}:<waiter-id>`.
    pub(crate) fn waiter_channel(&self, waiter: &str) -> String {
        format!("{}:{waiter}", self.channel)
    }

    /// A pattern matching the wake-up channel of every waiter of one client (waiter ids are
    /// `<client-id>:<number>`): `redisson_lock__channel:{name}:<client-id>:*`, with the glob
    /// characters of the name escaped.
    pub(crate) fn waiters_pattern(&self, client: &str) -> String {
        let mut pattern = String::with_capacity(self.channel.len() + client.len() + 3);
        for c in self
            .channel
            .chars()
            .chain(std::iter::once(':'))
            .chain(client.chars())
        {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str(":*");
        pattern
    }
}
