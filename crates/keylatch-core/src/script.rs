//! The script loader: static Lua scripts run by EVALSHA, reloaded transparently.

use std::sync::OnceLock;

use deadpool_redis::redis::{self, ToRedisArgs};

/// A Lua script compiled into the program, run by its SHA1 (EVALSHA).
///
/// Declare each script once, as a `static`, next to the Rust that runs it:
///
/// ```
/// use keylatch_core::LuaScript;
///
/// static PING_BACK: LuaScript = LuaScript::new("ping_back", "return ARGV[1]");
/// assert_eq!(PING_BACK.hash().len(), 40);
/// ```
///
/// The [`Client`](crate::Client) loads scripts when it connects
/// ([`Client::preload`](crate::Client::preload)) and, when the server answers `NOSCRIPT`
/// (after `SCRIPT FLUSH`, a restart or a failover), sends `SCRIPT LOAD` and the call again in one
/// pipelined round trip. Callers never see `NOSCRIPT`.
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    hash: OnceLock<String>,
}

impl LuaScript {
    /// Declares a script.
    pub const fn new(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript {
            name,
            source,
            hash: OnceLock::new(),
        }
    }

    /// The script's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The SHA1 that EVALSHA uses.
    pub fn hash(&self) -> &str {
        self.hash
            .get_or_init(|| redis::Script::new(self.source).get_hash().to_owned())
    }

    /// Starts a call of this script.
    pub fn call(&'static self) -> ScriptCall {
        ScriptCall {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub(crate) fn load_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.source);
        cmd
    }
}

impl std::fmt::Debug for LuaScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuaScript")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// One invocation of a [`LuaScript`]: its keys and arguments. Run it with
/// [`Client::eval`](crate::Client::eval) or, many at once in one round trip, with
/// [`Client::eval_batch`](crate::Client::eval_batch).
#[derive(Debug, Clone)]
#[must_use]
pub struct ScriptCall {
    script: &'static LuaScript,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
}

impl ScriptCall {
    /// Adds a key (`KEYS[n]`).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    /// Adds an argument (`ARGV[n]`).
    pub fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// The script.
    pub fn script(&self) -> &'static LuaScript {
        self.script
    }

    /// The first key, for error messages.
    pub fn first_key(&self) -> &str {
        self.keys.first().map_or("", String::as_str)
    }

    pub(crate) fn evalsha_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.hash()).arg(self.keys.len());
        for key in &self.keys {
            cmd.arg(key);
        }
        for arg in &self.args {
            cmd.arg(arg.as_slice());
        }
        cmd
    }
}
