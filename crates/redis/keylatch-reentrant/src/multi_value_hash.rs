//! A value's field name as Redisson's `RedissonFasterMultiLock` makes it with `StringCodec`:
//! `Hash.hash128toBase64` of the value's UTF-8 bytes, that is HighwayHash-128 under Redisson's
//! fixed key, the two 64-bit halves big-endian, in standard base64 without its `==` padding.
//! Imports the standard library only.

/// Redisson's HighwayHash key (`org.redisson.misc.Hash.KEY`).
const KEY: [u64; 4] = [
    0x9e37_79b9_7f4a_7c15,
    0xf39c_c060_5ced_c834,
    0x1082_276b_f3a2_7251,
    0xf86c_6a11_d0c1_8e95,
];

/// The hash field Redisson names `value` by.
pub(crate) fn field_of(value: &str) -> String {
    let [high, low] = hash128(value.as_bytes());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    base64_unpadded(&bytes)
}

fn base64_unpadded(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextets = [n >> 18, n >> 12, n >> 6, n];
        for sextet in &sextets[..=chunk.len()] {
            out.push(char::from(ALPHABET[(*sextet & 63) as usize]));
        }
    }
    out
}

struct HighwayHash {
    v0: [u64; 4],
    v1: [u64; 4],
    mul0: [u64; 4],
    mul1: [u64; 4],
}

fn hash128(data: &[u8]) -> [u64; 2] {
    let mut h = HighwayHash::new(KEY);
    let mut chunks = data.chunks_exact(32);
    for packet in &mut chunks {
        h.update_packet(packet);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        h.update_remainder(rest);
    }
    h.finalize128()
}

fn read64(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

fn zipper_merge0(v1: u64, v0: u64) -> u64 {
    (((v0 & 0xff00_0000) | (v1 & 0xff_0000_0000)) >> 24)
        | (((v0 & 0xff00_0000_0000) | (v1 & 0x00ff_0000_0000_0000)) >> 16)
        | (v0 & 0x00ff_0000)
        | ((v0 & 0xff00) << 32)
        | ((v1 & 0xff00_0000_0000_0000) >> 8)
        | (v0 << 56)
}

fn zipper_merge1(v1: u64, v0: u64) -> u64 {
    (((v1 & 0xff00_0000) | (v0 & 0xff_0000_0000)) >> 24)
        | (v1 & 0x00ff_0000)
        | ((v1 & 0xff00_0000_0000) >> 16)
        | ((v1 & 0xff00) << 24)
        | ((v0 & 0x00ff_0000_0000_0000) >> 8)
        | ((v1 & 0xff) << 48)
        | (v0 & 0xff00_0000_0000_0000)
}

impl HighwayHash {
    fn new(key: [u64; 4]) -> HighwayHash {
        let mul0 = [
            0xdbe6_d5d5_fe4c_ce2f,
            0xa409_3822_299f_31d0,
            0x1319_8a2e_0370_7344,
            0x243f_6a88_85a3_08d3,
        ];
        let mul1 = [
            0x3bd3_9e10_cb0e_f593,
            0xc0ac_f169_b5f1_8a8c,
            0xbe54_66cf_34e9_0c6c,
            0x4528_21e6_38d0_1377,
        ];
        let mut v0 = [0; 4];
        let mut v1 = [0; 4];
        for i in 0..4 {
            v0[i] = mul0[i] ^ key[i];
            v1[i] = mul1[i] ^ key[i].rotate_left(32);
        }
        HighwayHash { v0, v1, mul0, mul1 }
    }

    fn update_packet(&mut self, packet: &[u8]) {
        self.update([
            read64(&packet[0..]),
            read64(&packet[8..]),
            read64(&packet[16..]),
            read64(&packet[24..]),
        ]);
    }

    fn update(&mut self, a: [u64; 4]) {
        for (i, lane) in a.iter().enumerate() {
            self.v1[i] = self.v1[i].wrapping_add(self.mul0[i].wrapping_add(*lane));
        }
        for i in 0..4 {
            self.mul0[i] ^= (self.v1[i] & 0xffff_ffff).wrapping_mul(self.v0[i] >> 32);
            self.v0[i] = self.v0[i].wrapping_add(self.mul1[i]);
            self.mul1[i] ^= (self.v0[i] & 0xffff_ffff).wrapping_mul(self.v1[i] >> 32);
        }
        let (v0, v1) = (&mut self.v0, &mut self.v1);
        v0[0] = v0[0].wrapping_add(zipper_merge0(v1[1], v1[0]));
        v0[1] = v0[1].wrapping_add(zipper_merge1(v1[1], v1[0]));
        v0[2] = v0[2].wrapping_add(zipper_merge0(v1[3], v1[2]));
        v0[3] = v0[3].wrapping_add(zipper_merge1(v1[3], v1[2]));
        v1[0] = v1[0].wrapping_add(zipper_merge0(v0[1], v0[0]));
        v1[1] = v1[1].wrapping_add(zipper_merge1(v0[1], v0[0]));
        v1[2] = v1[2].wrapping_add(zipper_merge0(v0[3], v0[2]));
        v1[3] = v1[3].wrapping_add(zipper_merge1(v0[3], v0[2]));
    }

    /// The last `bytes.len()` (1 to 31) bytes.
    fn update_remainder(&mut self, bytes: &[u8]) {
        let size = bytes.len();
        let size_mod4 = size & 3;
        let remainder = size & !3;
        let mut packet = [0u8; 32];
        let size64 = size as u64;
        for lane in &mut self.v0 {
            *lane = lane.wrapping_add((size64 << 32).wrapping_add(size64));
        }
        for lane in &mut self.v1 {
            let low = (*lane as u32).rotate_left(size as u32);
            let high = ((*lane >> 32) as u32).rotate_left(size as u32);
            *lane = u64::from(low) | (u64::from(high) << 32);
        }
        packet[..remainder].copy_from_slice(&bytes[..remainder]);
        if size & 16 != 0 {
            for i in 0..4 {
                packet[28 + i] = bytes[remainder + i + size_mod4 - 4];
            }
        } else if size_mod4 != 0 {
            packet[16] = bytes[remainder];
            packet[17] = bytes[remainder + (size_mod4 >> 1)];
            packet[18] = bytes[remainder + size_mod4 - 1];
        }
        self.update_packet(&packet);
    }

    fn permute_and_update(&mut self) {
        let v0 = self.v0;
        self.update([
            v0[2].rotate_left(32),
            v0[3].rotate_left(32),
            v0[0].rotate_left(32),
            v0[1].rotate_left(32),
        ]);
    }

    fn finalize128(mut self) -> [u64; 2] {
        for _ in 0..6 {
            self.permute_and_update();
        }
        [
            self.v0[0]
                .wrapping_add(self.mul0[0])
                .wrapping_add(self.v1[2])
                .wrapping_add(self.mul1[2]),
            self.v0[1]
                .wrapping_add(self.mul0[1])
                .wrapping_add(self.v1[3])
                .wrapping_add(self.mul1[3]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::field_of;

    /// Computed by Redisson's own `HighwayHash` (Java) under its key, encoded as
    /// `Hash.hash128toBase64` does.
    #[test]
    fn fields_match_redissons_hash() {
        let vectors = [
            ("a", "qwvAS12pR0CgRitaypEjUw"),
            ("Jack_001", "7pNoDdizVy2xY792MaFv+w"),
            ("Mary_002", "kIX2DFOX4IWct7G7K6tV9A"),
            ("0123456789abcdef0123456789abcdef", "08hr0B8iaf3PoSsWAS8sWA"),
            (
                "0123456789abcdef0123456789abcdef0123456789",
                "RajIAtkm4l7eM9bs8Z73Iw",
            ),
            (
                "a value of fifty bytes, more or less, to hash it!!",
                "g7+UYARoWN1MxfXp02pINw",
            ),
            ("日本語", "4PLJx8KOCYUcHV8bTDfq4g"),
            ("a:b", "m1YnCm29Koyn/QJf4WEW0g"),
            ("x", "Bt/D4wylKYCgzX0jVwjowg"),
        ];
        for (value, field) in vectors {
            assert_eq!(field_of(value), field, "{value}");
        }
    }
}
