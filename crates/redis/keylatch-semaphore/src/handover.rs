//! Hand-over by permit id (redis-semaphore's `acquiredExternally`): a process that was given a
//! permit id adopts the permit with a guard of its own ([`PermitExpirableSemaphore::adopt`]).
//! Releasing a permit by id without a guard is [`PermitExpirableSemaphore::release`].
//!
//! May import: `expirable.rs`, `permit.rs`, `retry.rs`, the scripts.

use keylatch_core::{Owner, Result};
use keylatch_redis::redis::Value;
use tokio::time::Instant;

use crate::expirable::{PermitExpirableSemaphore, is_permit_id};
use crate::permit::Permit;
use crate::retry::run_idempotent;
use crate::scripts::EXP_RENEW;
use crate::semaphore_shared::unexpected;

impl PermitExpirableSemaphore {
    /// Takes over the permit `id` (acquired by any process, such as a scheduler that hands the
    /// work on): its lease is set to this client's watchdog timeout at once, and the returned
    /// [`Permit`] renews it with this client's watchdog, reports its loss and gives it back, as
    /// if this client had acquired it. `None` when the id is unknown or its lease already
    /// ended (nothing changed).
    ///
    /// So that one process keeps the permit, the side handing it over calls
    /// [`Permit::forget`] (which returns the id) before passing the id along.
    ///
    /// # Errors
    /// [`Error::InvalidName`](keylatch_core::Error::InvalidName),
    /// [`Error::WrongType`](keylatch_core::Error::WrongType), Redis errors.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the lease set again and nothing registered: the permit
    /// then comes back when that lease ends, unless adopted again.
    ///
    /// ```no_run
    /// # async fn demo(client: keylatch::Client, id: String) -> keylatch::Result<()> {
    /// // `id` came from the process that acquired the permit and called `permit.forget()`.
    /// let workers = client.permit_expirable_semaphore("workers");
    /// if let Some(permit) = workers.adopt(&id).await? {
    ///     // … the work, renewed by this process's watchdog …
    ///     permit.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn adopt(&self, id: &str) -> Result<Option<Permit>> {
        self.shared.client.validate_name(self.name())?;
        if !is_permit_id(id) {
            return Ok(None);
        }
        let client = &self.shared.client;
        let lease = client.config().watchdog_timeout;
        let sent_at = Instant::now();
        // Setting a lease from now is idempotent enough to retry.
        match run_idempotent(client, &self.update_call(id, lease), sent_at).await? {
            (Value::Int(left), _) if left >= 0 => Ok(Some(Permit::new(
                &self.shared,
                id.to_ascii_lowercase(),
                client.owner_id(Owner::unique()),
                lease,
                EXP_RENEW.renewal(),
                sent_at,
            ))),
            (Value::Int(-1), _) => Ok(None),
            _ => Err(unexpected("expirable_semaphore_update_lease")),
        }
    }
}
