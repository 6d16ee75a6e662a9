//! The script loader: static Lua scripts run by EVALSHA, reloaded transparently.

use std::sync::OnceLock;

use deadpool_redis::redis::{self, ToRedisArgs};

/// Lua that defines `next_token(key)`: the next fencing token of the counter `key`, never below
/// the server clock in microseconds, so that tokens keep increasing even when the counter is lost
/// (a restart without persistence, a failover, `FLUSHALL`). Prepend it with
/// [`LuaScript::taking_with`].
pub const NEXT_TOKEN: &str = include_str!("../lua/next_token.lua");

/// A Lua script compiled into the program, run by its SHA1 (EVALSHA).
///
/// Declare each script once, as a `static`, next to the Rust that runs it:
///
/// ```
/// use keylatch_redis::LuaScript;
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
    /// The shebang line that carries the script's flags (Redis 7), or nothing.
    header: &'static str,
    /// Shared Lua the script builds on (such as [`NEXT_TOKEN`]), or nothing.
    prelude: &'static str,
    source: &'static str,
    /// The source Redis runs: `header`, `prelude`, then `source`.
    full: OnceLock<String>,
    hash: OnceLock<String>,
    /// The variant for sharded pub/sub (Redis Cluster): `spublish` for `publish`, and its hash.
    sharded: OnceLock<(String, String)>,
    /// The batch variant (see [`coalescing`](LuaScript::coalescing)): its source and hash.
    batched: OnceLock<(String, String)>,
    acquires: bool,
    /// Set for scripts that may be coalesced: whether a reply means something was taken.
    took: Option<fn(&redis::Value) -> bool>,
}

/// Runs a script's body once per call of a batch (`ARGV`: the number of calls, then for each
/// its key count, its argument count and its arguments; `KEYS`: every call's keys in turn),
/// each under `pcall`, so one call's error is that call's reply alone. Replies come back in
/// order, `nil` as `false`.
const BATCH_LOOP: &str = r"
local replies = {}
local k, a = 0, 2
for i = 1, tonumber(ARGV[1]) do
  local nkeys, nargs = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  local keys, args = {}, {}
  for j = 1, nkeys do keys[j] = KEYS[k + j] end
  for j = 1, nargs do args[j] = ARGV[a + j - 1] end
  k, a = k + nkeys, a + nargs
  local ok, reply = pcall(keylatch_one, keys, args)
  if not ok and not (type(reply) == 'table' and reply.err) then
    reply = redis.error_reply(tostring(reply))
  end
  if reply == nil then reply = false end
  replies[i] = reply
end
return replies
";

impl LuaScript {
    /// Declares a script without flags: Redis decides about memory at its first write, so a
    /// script that writes must not run out of memory half-way. Prefer
    /// [`taking`](LuaScript::taking) or [`freeing`](LuaScript::freeing).
    pub const fn new(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript::with_header(name, "", "", source)
    }

    /// Declares a script that takes something (a hold, a permit, a queue place): it declares
    /// no flags (`#!lua`), so when Redis is out of memory (`maxmemory` reached under
    /// `noeviction`) the server refuses it before it runs, and nothing is half-written. The
    /// caller gets [`Error::OutOfMemory`](keylatch_core::Error::OutOfMemory). Needs Redis 7.
    pub const fn taking(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript::with_header(name, "#!lua\n", "", source)
    }

    /// As [`taking`](LuaScript::taking), with shared Lua (`prelude`, such as [`NEXT_TOKEN`])
    /// placed before `source`.
    pub const fn taking_with(
        name: &'static str,
        prelude: &'static str,
        source: &'static str,
    ) -> LuaScript {
        LuaScript::with_header(name, "#!lua\n", prelude, source)
    }

    /// Declares a script that frees or extends (a release, a renewal, leaving a queue), and at
    /// most hands what it frees to the next in line (the fair lock's grant): it declares
    /// `allow-oom`, so it runs even when Redis is out of memory, which it helps relieve. Needs
    /// Redis 7.
    pub const fn freeing(name: &'static str, source: &'static str) -> LuaScript {
        LuaScript::with_header(name, "#!lua flags=allow-oom\n", "", source)
    }

    /// As [`freeing`](LuaScript::freeing), with shared Lua (`prelude`, such as [`NEXT_TOKEN`])
    /// placed before `source`.
    pub const fn freeing_with(
        name: &'static str,
        prelude: &'static str,
        source: &'static str,
    ) -> LuaScript {
        LuaScript::with_header(name, "#!lua flags=allow-oom\n", prelude, source)
    }

    const fn with_header(
        name: &'static str,
        header: &'static str,
        prelude: &'static str,
        source: &'static str,
    ) -> Self {
        LuaScript {
            name,
            header,
            prelude,
            source,
            full: OnceLock::new(),
            hash: OnceLock::new(),
            sharded: OnceLock::new(),
            batched: OnceLock::new(),
            acquires: false,
            took: None,
        }
    }

    /// Lets concurrent calls of this script be coalesced into one script call
    /// ([`Config::coalesce`](crate::Config::coalesce)), for calls made with
    /// [`Client::eval_undoable`](crate::Client::eval_undoable). `took` says whether a reply
    /// means the call took something (then a caller that went away before it could see the
    /// reply has it undone).
    ///
    /// The script must return to its first statement safely when it refuses (an error before
    /// anything is written), as every script that takes should: a batch runs each call under
    /// `pcall`, and a call that raises half-way keeps what it wrote.
    pub const fn coalescing(mut self, took: fn(&redis::Value) -> bool) -> Self {
        self.took = Some(took);
        self
    }

    /// Whether a reply of this script means something was taken; `None` for a script that is
    /// not [`coalescing`](LuaScript::coalescing).
    pub(crate) fn took(&self) -> Option<fn(&redis::Value) -> bool> {
        self.took
    }

    /// The batch variant: the script's body as a function run once per call (see
    /// `BATCH_LOOP`), with the same flags. Its source and hash.
    pub(crate) fn batched(&self) -> &(String, String) {
        self.batched.get_or_init(|| {
            let source = format!(
                "{}{}local function keylatch_one(KEYS, ARGV)\n{}\nend\n{}",
                self.header, self.prelude, self.source, BATCH_LOOP
            );
            let hash = redis::Script::new(&source).get_hash().to_owned();
            (source, hash)
        })
    }

    /// Marks the script as an acquisition: with replica acknowledgement
    /// ([`Config::replicas`](crate::Config::replicas)) each call waits for the replicas.
    pub const fn acquisition(mut self) -> Self {
        self.acquires = true;
        self
    }

    /// Whether the script is an acquisition (see [`acquisition`](Self::acquisition)).
    pub fn is_acquisition(&self) -> bool {
        self.acquires
    }

    /// The script's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The source Redis runs: the flags' shebang line, if any, then the Lua source.
    pub fn source(&self) -> &str {
        self.full
            .get_or_init(|| format!("{}{}{}", self.header, self.prelude, self.source))
    }

    /// The SHA1 that EVALSHA uses.
    pub fn hash(&self) -> &str {
        self.hash
            .get_or_init(|| redis::Script::new(self.source()).get_hash().to_owned())
    }

    /// The variant Redis runs on a cluster with sharded pub/sub: every
    /// `redis.call('publish', …)` becomes `redis.call('spublish', …)`, so a wake-up reaches the
    /// subscribers of the channel's shard (channels share their lock's hash slot). Its source
    /// and its SHA1.
    fn sharded(&self) -> &(String, String) {
        self.sharded.get_or_init(|| {
            let source = self
                .source()
                .replace("redis.call('publish',", "redis.call('spublish',");
            let hash = redis::Script::new(&source).get_hash().to_owned();
            (source, hash)
        })
    }

    /// The SHA1 of the variant in use: sharded (see above) or not.
    pub(crate) fn hash_for(&self, sharded: bool) -> &str {
        if sharded {
            &self.sharded().1
        } else {
            self.hash()
        }
    }

    /// Starts a call of this script.
    pub fn call(&'static self) -> ScriptCall {
        ScriptCall {
            script: self,
            // Room for a typical call's keys and arguments (a lock, a counter, a lease, an owner
            // id, a flag), so adding them does not grow the buffer step by step.
            parts: redis::Cmd::with_capacity(6, 160),
            keys: 0,
        }
    }

    /// `SCRIPT LOAD` of the batch variant, for a [`coalescing`](LuaScript::coalescing) script.
    pub(crate) fn batched_load_cmd(&self) -> Option<redis::Cmd> {
        self.took?;
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(&self.batched().0);
        Some(cmd)
    }

    pub(crate) fn load_cmd(&self, sharded: bool) -> redis::Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        if sharded {
            cmd.arg("LOAD").arg(&self.sharded().0);
        } else {
            cmd.arg("LOAD").arg(self.source());
        }
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
    /// The keys, then the arguments, serialised as they are added into one buffer (a command
    /// with no name): one allocation for the whole call, however many keys it has.
    parts: redis::Cmd,
    /// How many of `parts` are keys.
    keys: usize,
}

/// The bytes of a serialised part.
fn part_bytes(arg: redis::Arg<&[u8]>) -> &[u8] {
    match arg {
        redis::Arg::Simple(bytes) => bytes,
        _ => &[],
    }
}

impl ScriptCall {
    /// Adds a key (`KEYS[n]`).
    pub fn key(mut self, key: impl AsRef<str>) -> Self {
        if self.parts.args_iter().len() == self.keys {
            self.parts.arg(key.as_ref());
        } else {
            // A key after an argument (not the usual order): the keys go first.
            let mut parts = redis::Cmd::with_capacity(self.parts.args_iter().len() + 1, 160);
            for part in self.parts.args_iter().take(self.keys) {
                parts.arg(part_bytes(part));
            }
            parts.arg(key.as_ref());
            for part in self.parts.args_iter().skip(self.keys) {
                parts.arg(part_bytes(part));
            }
            self.parts = parts;
        }
        self.keys += 1;
        self
    }

    /// Adds an argument (`ARGV[n]`).
    pub fn arg(mut self, arg: impl ToRedisArgs) -> Self {
        self.parts.arg(arg);
        self
    }

    /// The script.
    pub fn script(&self) -> &'static LuaScript {
        self.script
    }

    /// The keys, serialised.
    pub(crate) fn keys(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        self.parts.args_iter().take(self.keys).map(part_bytes)
    }

    /// The arguments, serialised.
    pub(crate) fn args(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        self.parts.args_iter().skip(self.keys).map(part_bytes)
    }

    /// The first key, for error messages.
    pub fn first_key(&self) -> &str {
        self.keys()
            .next()
            .and_then(|key| std::str::from_utf8(key).ok())
            .unwrap_or("")
    }

    /// The `EVALSHA` of this call, of the sharded variant or not.
    pub(crate) fn evalsha_cmd(&self, sharded: bool) -> redis::Cmd {
        // Sized once: building it argument by argument would grow (and copy) it several times.
        let parts = self.parts.args_iter().map(part_bytes);
        let bytes = 7 + 40 + 20 + parts.clone().map(<[u8]>::len).sum::<usize>();
        let mut cmd = redis::Cmd::with_capacity(3 + parts.len(), bytes);
        cmd.arg("EVALSHA")
            .arg(self.script.hash_for(sharded))
            .arg(self.keys);
        for part in parts {
            cmd.arg(part);
        }
        cmd
    }
}
