//! Redis's CRC64 (Jones polynomial, reflected, initial value 0: `CRC-64/REDIS` in the CRC
//! catalogue), which ends every DUMP payload and every RDB file.
//!
//! The `crc` crate implements it with slice-by-16 tables built at compile time. Measured
//! over 64 MiB in a release build on the shared 2-core machine: 0.6 to 0.95 GB/s (noisy),
//! against 0.2 GB/s for the bit-at-a-time loop FUNCTION DUMP used before.

use crc::{Crc, Table, CRC_64_REDIS};

static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// The CRC64 of `data`.
pub fn crc64(data: &[u8]) -> u64 {
    CRC64.checksum(data)
}

/// A running CRC64 over data that arrives in pieces.
pub struct Crc64Digest(crc::Digest<'static, u64, Table<16>>);

impl Crc64Digest {
    /// A digest of nothing yet.
    pub fn new() -> Crc64Digest {
        Crc64Digest(CRC64.digest())
    }

    /// Add `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The CRC64 of everything added.
    pub fn finish(self) -> u64 {
        self.0.finalize()
    }
}

impl Default for Crc64Digest {
    fn default() -> Self {
        Crc64Digest::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_test_vector() {
        // Redis's crc64.c self-test.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let text = b"This is a test of the emergency broadcast system.";
        let mut d = Crc64Digest::new();
        d.update(&text[..10]);
        d.update(&text[10..]);
        assert_eq!(d.finish(), crc64(text));
    }
}
