//! Moving a slot and its keys from one primary to another (`MIGRATING`, `IMPORTING`,
//! `MIGRATE`), as a resharding does.

use super::*;

impl RedisCluster {
    /// Moves `slot` with all its keys from primary `from` to primary `to`:
    /// [`begin_slot_migration`](Self::begin_slot_migration),
    /// [`move_slot_keys`](Self::move_slot_keys), then
    /// [`finish_slot_migration`](Self::finish_slot_migration). Returns the number of
    /// keys moved.
    pub fn migrate_slot(
        &self,
        slot: u16,
        from: &RedisServer,
        to: &RedisServer,
    ) -> io::Result<usize> {
        self.begin_slot_migration(slot, from, to)?;
        let moved = self.move_slot_keys(slot, from, to)?;
        self.finish_slot_migration(slot, to)?;
        Ok(moved)
    }

    /// Starts moving `slot` from primary `from` to primary `to`: `CLUSTER SETSLOT slot
    /// IMPORTING` on `to`, then `CLUSTER SETSLOT slot MIGRATING` on `from`. From then on
    /// `from` answers `ASK` for keys of the slot it no longer has.
    pub fn begin_slot_migration(
        &self,
        slot: u16,
        from: &RedisServer,
        to: &RedisServer,
    ) -> io::Result<()> {
        let from_id = &self.ids[self.index_of(from)?];
        let to_id = &self.ids[self.index_of(to)?];
        if from_id == to_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a slot cannot move to the node it is on",
            ));
        }
        let slot = slot.to_string();
        self.command(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", from_id])?;
        self.command(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", to_id])?;
        Ok(())
    }

    /// Moves the keys of `slot` from `from` to `to`, 100 at a time (`CLUSTER
    /// GETKEYSINSLOT`, then `MIGRATE … KEYS …`, logged in to `to` with the cluster's
    /// password), after [`begin_slot_migration`](Self::begin_slot_migration). Returns the
    /// number of keys handed to `MIGRATE`. Keys must be UTF-8.
    pub fn move_slot_keys(
        &self,
        slot: u16,
        from: &RedisServer,
        to: &RedisServer,
    ) -> io::Result<usize> {
        self.index_of(from)?;
        self.index_of(to)?;
        let slot_text = slot.to_string();
        let to_port = to.port().to_string();
        let deadline = Instant::now() + MOVE_KEYS_TIMEOUT;
        let mut moved = 0;
        loop {
            let keys = match self.request(
                from,
                &["CLUSTER", "GETKEYSINSLOT", &slot_text, KEYS_PER_BATCH],
                COMMAND_TIMEOUT,
            )? {
                Reply::Array(items) => items
                    .into_iter()
                    .map(|item| match item {
                        Reply::Bulk(b) => String::from_utf8(b).map_err(|_| {
                            io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("a key in slot {slot} is not UTF-8"),
                            )
                        }),
                        other => Err(io::Error::other(format!("GETKEYSINSLOT: {other:?}"))),
                    })
                    .collect::<io::Result<Vec<String>>>()?,
                other => return Err(io::Error::other(format!("GETKEYSINSLOT: {other:?}"))),
            };
            if keys.is_empty() {
                return Ok(moved);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "slot {slot}: keys left on node {} after {MOVE_KEYS_TIMEOUT:?} ({moved} moved)",
                        from.port()
                    ),
                ));
            }
            let mut args = vec![
                "MIGRATE",
                "127.0.0.1",
                &to_port,
                "",
                "0",
                MIGRATE_TIMEOUT_MS,
            ];
            if let Some(Secret(password)) = &self.password {
                args.extend(["AUTH", password.as_str()]);
            }
            args.push("KEYS");
            args.extend(keys.iter().map(String::as_str));
            self.request(from, &args, COMMAND_TIMEOUT)?;
            moved += keys.len();
        }
    }

    /// Ends a slot migration: `CLUSTER SETSLOT slot NODE <to>` on `to`, then on every
    /// other primary (the source among them; it refuses while it still holds keys of the
    /// slot). Then waits until every node that answers names `to` as the owner.
    pub fn finish_slot_migration(&self, slot: u16, to: &RedisServer) -> io::Result<()> {
        let to_id = &self.ids[self.index_of(to)?];
        let slot_text = slot.to_string();
        let setslot = ["CLUSTER", "SETSLOT", &slot_text, "NODE", to_id];
        self.command(to, &setslot)?;
        let view = self.view_of(to)?;
        for line in view.iter().filter(|n| n.is_primary() && !n.failed()) {
            if line.id != *to_id {
                self.command(self.node_by_id(&line.id)?, &setslot)?;
            }
        }
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let lagging: Vec<u16> = self
                .views()
                .into_iter()
                .filter_map(|(node, view)| {
                    let view = view?;
                    let owner = view.iter().find(|n| n.is_primary() && n.owns(slot));
                    (owner.map(|n| &n.id) != Some(to_id)).then(|| node.port())
                })
                .collect();
            if lagging.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "slot {slot}: nodes {lagging:?} do not name node {} as its owner \
                         after {SETTLE_TIMEOUT:?}",
                        to.port()
                    ),
                ));
            }
            thread::sleep(POLL);
        }
    }
}
