//! Redis Cluster's key → hash slot map: CRC16 (XMODEM) of the key, or of
//! its hash tag (the bytes between the first `{` and the next `}`, when
//! that is not empty), modulo 16 384 — as Redis's `keyHashSlot`.

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis's
/// `crc16.c`.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) & (SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The XMODEM check value, as in Redis's crc16.c comment.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn slots_as_redis_computes_them() {
        // `CLUSTER KEYSLOT` answers of redis-server 7.0.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") & 16383);
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }
}
