//! Owner identity: who holds a reentrant hold.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use uuid::Uuid;

/// Every owner number of the process comes from this one counter, so no two owners share one.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// Who an acquisition is for. Reentrancy is per owner, as Redisson's is per thread, but an
/// owner is never inferred from whichever task happens to poll the future: it is asked for.
///
/// - **By default every acquisition is a new owner.** Two acquisitions of the same name
///   exclude each other, even when one task polls both (`join!`, `select!`,
///   `FuturesUnordered`), as with `tokio::sync::Mutex`.
/// - **Reentrancy is explicit.** Acquire again for the owner of a held guard
///   (`lock.with_owner(guard.owner())`), or give a handle an owner scope made with
///   [`Owner::unique`]: every acquisition through that handle is then for that owner, and
///   re-enters the holds it already has.
///
/// On the wire the owner id keeps Redisson's `<client-uuid>:<number>` form ([`OwnerId`]); the
/// number comes from one counter per process, so no two owners of a process are ever the same.
///
/// ```no_run
/// # async fn demo(client: keylatch::Client) -> keylatch::Result<()> {
/// let lock = client.lock("report");
///
/// // Two acquisitions polled by one task: the second waits for the first.
/// let first = lock.lock().await?;
/// assert!(lock.try_lock().await?.is_none());
///
/// // Re-entering is asked for: acquire for the holder's owner.
/// let again = lock.with_owner(first.owner()).lock().await?;
/// again.unlock().await?;
/// first.unlock().await?;
///
/// // An owner scope: every acquisition through `job` is for one owner.
/// let job = lock.with_owner(keylatch::Owner::unique());
/// let outer = job.lock().await?;
/// let inner = job.lock().await?; // re-enters
/// inner.unlock().await?;
/// outer.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    number: u64,
}

impl Owner {
    /// A fresh owner that no other owner of this process shares.
    pub fn unique() -> Owner {
        Owner {
            number: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// `owner`, or a fresh one when it is `None` (the default of a lock handle).
    pub fn or_unique(owner: Option<Owner>) -> Owner {
        owner.unwrap_or_else(Owner::unique)
    }

    /// The owner number: the second half of the owner id.
    pub fn number(self) -> u64 {
        self.number
    }

    /// The full owner id for a client.
    pub fn resolve(self, client: Uuid) -> OwnerId {
        OwnerId {
            client,
            number: self.number,
        }
    }
}

impl From<OwnerId> for Owner {
    /// The owner of an owner id (to re-enter a hold whose id is known).
    fn from(id: OwnerId) -> Owner {
        Owner { number: id.number }
    }
}

/// A resolved owner: `<client-uuid>:<owner-number>`, the hash field Redisson uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId {
    client: Uuid,
    number: u64,
}

impl OwnerId {
    /// The client's UUID.
    pub fn client(&self) -> Uuid {
        self.client
    }

    /// The owner number within the client.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The owner, to acquire again for it.
    pub fn owner(&self) -> Owner {
        Owner {
            number: self.number,
        }
    }
}

/// An owner id's wire form, `<client-uuid>:<number>`, on the stack: a store writes it into a
/// command's argument without allocating ([`OwnerId::wire_form`]).
#[derive(Clone, Copy)]
pub struct OwnerIdText {
    buf: [u8; 57],
    len: usize,
}

impl OwnerIdText {
    /// The text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len])
            .expect("hex digits, hyphens and digits are ASCII")
    }
}

impl fmt::Debug for OwnerIdText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl OwnerId {
    /// The wire form, `<client-uuid>:<number>` (Redisson's hash field), without allocating.
    pub fn wire_form(&self) -> OwnerIdText {
        // 36 for the hyphenated UUID, 1 for ':', at most 20 digits.
        let mut buf = [0u8; 57];
        self.client.hyphenated().encode_lower(&mut buf[..36]);
        buf[36] = b':';
        let mut digits = [0u8; 20];
        let mut n = self.number;
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in 0..len {
            buf[37 + i] = digits[len - 1 - i];
        }
        OwnerIdText { buf, len: 37 + len }
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One write, so `to_string` allocates its text once, at its size.
        f.write_str(self.wire_form().as_str())
    }
}

/// An owner id's text that is not `<client-uuid>:<number>` ([`OwnerId`]'s `FromStr`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid owner id: {reason}")]
pub struct ParseOwnerIdError {
    reason: &'static str,
}

impl std::str::FromStr for OwnerId {
    type Err = ParseOwnerIdError;

    /// Parses the wire form, `<client-uuid>:<number>` (as [`Display`](fmt::Display) writes
    /// it), for a process that was given an owner id as text.
    ///
    /// ```
    /// let id: keylatch_core::OwnerId = "6f1c2a3e-8d4b-4f5a-9c7e-1b2d3e4f5a6b:42".parse().unwrap();
    /// assert_eq!(id.number(), 42);
    /// assert_eq!(id.to_string(), "6f1c2a3e-8d4b-4f5a-9c7e-1b2d3e4f5a6b:42");
    /// assert!("not-an-owner".parse::<keylatch_core::OwnerId>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<OwnerId, ParseOwnerIdError> {
        let (client, number) = text.rsplit_once(':').ok_or(ParseOwnerIdError {
            reason: "no ':' between the client's UUID and the number",
        })?;
        let client = Uuid::try_parse(client).map_err(|_| ParseOwnerIdError {
            reason: "the client part is not a UUID",
        })?;
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ParseOwnerIdError {
                reason: "the number is not a decimal number",
            });
        }
        let number = number.parse().map_err(|_| ParseOwnerIdError {
            reason: "the number is larger than 2^64 - 1",
        })?;
        Ok(OwnerId { client, number })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_ids_parse_back_and_bad_text_is_refused() {
        for number in [0, 7, u64::MAX] {
            let id = OwnerId {
                client: Uuid::new_v4(),
                number,
            };
            assert_eq!(id.to_string().parse::<OwnerId>(), Ok(id));
        }
        let uuid = Uuid::new_v4();
        for bad in [
            String::new(),
            "x".to_owned(),
            format!("{uuid}"),
            format!("{uuid}:"),
            format!("{uuid}:-1"),
            format!("{uuid}:+1"),
            format!("{uuid}:18446744073709551616"),
            "nope:1".to_owned(),
        ] {
            assert!(bad.parse::<OwnerId>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_wire_form_is_the_display_form() {
        for number in [0, 7, 10, 12_345, u64::MAX] {
            let owner = OwnerId {
                client: Uuid::new_v4(),
                number,
            };
            assert_eq!(owner.wire_form().as_str(), owner.to_string());
        }
    }

    #[test]
    fn owners_never_collide() {
        let owners: Vec<Owner> = (0..1000).map(|_| Owner::unique()).collect();
        let distinct: std::collections::HashSet<u64> = owners.iter().map(|o| o.number()).collect();
        assert_eq!(distinct.len(), owners.len());
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| Owner::unique().number()))
            .collect();
        for t in threads {
            assert!(!distinct.contains(&t.join().unwrap()));
        }
        assert_ne!(Owner::or_unique(None), Owner::or_unique(None));
        let fixed = Owner::unique();
        assert_eq!(Owner::or_unique(Some(fixed)), fixed);
    }

    #[test]
    fn wire_form_is_redissons() {
        let owner = Owner::unique();
        let id = owner.resolve(Uuid::nil());
        assert_eq!(
            id.to_string(),
            format!("00000000-0000-0000-0000-000000000000:{}", owner.number())
        );
        assert_eq!(Owner::from(id), owner);
        assert_eq!(id.owner(), owner);
    }
}
