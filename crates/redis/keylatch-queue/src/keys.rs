//! A queue's keys and channel: Redisson's four, and keylatch's own under `keylatch_queue:`, all
//! in the name's cluster slot. Imports nothing of this crate.

/// Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when the name has a hash tag of
/// its own (then that tag decides the slot of every key).
fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The keys of the queue `name`.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    /// The destination list, where due elements go (Redisson's `RBlockingQueue` of the name).
    pub(crate) destination: String,
    /// The zset of delayed elements by due time, `redisson_delay_queue_timeout:{name}`.
    pub(crate) timeouts: String,
    /// The list of delayed elements in offer order, `redisson_delay_queue:{name}`.
    pub(crate) delayed: String,
    /// The channel of new heads' due times, `redisson_delay_queue_channel:{name}`.
    pub(crate) channel: String,
    /// keylatch's list of elements neither packing reads, `keylatch_queue:{name}:unreadable`.
    pub(crate) unreadable: String,
    /// Reliable takes' elements being processed, `keylatch_queue:{name}:processing`: a hash,
    /// `<consumer>:<delivery>` → `<delivery count>:<value>`.
    pub(crate) processing: String,
    /// When each of those becomes visible again, `keylatch_queue:{name}:deadlines`: a zset.
    pub(crate) deadlines: String,
    /// Elements given back for another delivery, `keylatch_queue:{name}:retry`: a list of
    /// `<delivery count>:<value>`, taken before the destination list.
    pub(crate) retry: String,
    /// Elements delivered the most times without an acknowledgement,
    /// `keylatch_queue:{name}:dead`: a list of values.
    pub(crate) dead: String,
    /// The prefix of keylatch's claims, `keylatch_queue:{name}:claim:`.
    claim_prefix: String,
}

impl Keys {
    pub(crate) fn new(name: &str) -> Keys {
        let own = prefixed("keylatch_queue", name);
        Keys {
            destination: name.to_owned(),
            timeouts: prefixed("redisson_delay_queue_timeout", name),
            delayed: prefixed("redisson_delay_queue", name),
            channel: prefixed("redisson_delay_queue_channel", name),
            unreadable: format!("{own}:unreadable"),
            processing: format!("{own}:processing"),
            deadlines: format!("{own}:deadlines"),
            retry: format!("{own}:retry"),
            dead: format!("{own}:dead"),
            claim_prefix: format!("{own}:claim:"),
        }
    }

    /// A new claim key for one take.
    pub(crate) fn claim(&self) -> String {
        format!("{}{}", self.claim_prefix, uuid::Uuid::new_v4().simple())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_redissons_names() {
        let keys = Keys::new("orders");
        assert_eq!(keys.destination, "orders");
        assert_eq!(keys.timeouts, "redisson_delay_queue_timeout:{orders}");
        assert_eq!(keys.delayed, "redisson_delay_queue:{orders}");
        assert_eq!(keys.channel, "redisson_delay_queue_channel:{orders}");
        assert_eq!(keys.unreadable, "keylatch_queue:{orders}:unreadable");
        assert_eq!(keys.processing, "keylatch_queue:{orders}:processing");
        assert_eq!(keys.dead, "keylatch_queue:{orders}:dead");
        assert!(keys.claim().starts_with("keylatch_queue:{orders}:claim:"));
        let tagged = Keys::new("{t}orders");
        assert_eq!(tagged.timeouts, "redisson_delay_queue_timeout:{t}orders");
    }
}
