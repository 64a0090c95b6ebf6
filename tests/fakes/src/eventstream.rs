//! The `application/vnd.amazon.eventstream` framing, written out by hand:
//! each message is a prelude (total length, headers length, the prelude's
//! CRC32), string headers (`:event-type`, `:content-type`, `:message-type`),
//! the JSON payload and the whole message's CRC32.

/// CRC-32 (IEEE 802.3), bit by bit: the fakes send few frames.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(name.as_bytes());
    out.push(7); // string
    out.extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(value.as_bytes());
}

/// One message with the given headers and payload.
pub fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut encoded_headers = Vec::new();
    for (name, value) in headers {
        header(&mut encoded_headers, name, value);
    }
    let total = 12 + encoded_headers.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(
        &u32::try_from(encoded_headers.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    let prelude_crc = crc32(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&encoded_headers);
    out.extend_from_slice(payload);
    let message_crc = crc32(&out);
    out.extend_from_slice(&message_crc.to_be_bytes());
    out
}

/// An event (`:message-type: event`) of the given type with a JSON payload.
pub fn event(kind: &str, payload: &serde_json::Value) -> Vec<u8> {
    frame(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

/// An exception in the stream (`:message-type: exception`), named as the
/// stream's error union names it (`throttlingException`, …).
pub fn exception(kind: &str, message: &str) -> Vec<u8> {
    frame(
        &[
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        serde_json::json!({"message": message}).to_string().as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_prelude_follow_the_format() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let message = frame(&[(":event-type", "x")], b"{}");
        let total = u32::from_be_bytes(message[0..4].try_into().unwrap()) as usize;
        let headers = u32::from_be_bytes(message[4..8].try_into().unwrap()) as usize;
        assert_eq!(total, message.len());
        assert_eq!(headers, 1 + 11 + 1 + 2 + 1);
        assert_eq!(
            u32::from_be_bytes(message[8..12].try_into().unwrap()),
            crc32(&message[..8])
        );
        assert_eq!(&message[12 + headers..total - 4], b"{}");
        assert_eq!(
            u32::from_be_bytes(message[total - 4..].try_into().unwrap()),
            crc32(&message[..total - 4])
        );
    }
}
