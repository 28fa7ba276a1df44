//! Request bodies sent in a `Content-Encoding`: agents compress what they send (Codex 0.171.0
//! zstd-compresses its Responses bodies), and a compaction must be recognized in them as in a
//! plain body. The codings agents use are decoded (gzip, deflate, br, zstd, and lists of them, the
//! last applied undone first), bounded by the body limit *after* decoding: a few kilobytes that
//! inflate to gigabytes are refused as soon as they pass the limit, never held whole.

use std::io::Read;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};

use super::error::ApiError;

/// Compressed bodies from this size are decoded off the runtime's threads.
const INLINE_BYTES: usize = 256 * 1024;

/// What a body holds once its codings are undone.
#[derive(Debug, Clone)]
pub(super) enum Content {
    /// The plain body: as it came (no coding, or `identity`), or decoded.
    Plain(Bytes),
    /// A coding compactd does not read (the name as the client gave it).
    Unknown(String),
}

/// One coding compactd reads.
#[derive(Debug, Clone, Copy)]
enum Coding {
    Gzip,
    Deflate,
    Brotli,
    Zstd,
}

/// The codings of `headers`' `Content-Encoding`, in the order they were applied; `Err` names the
/// first one compactd does not read.
fn codings(headers: &HeaderMap) -> Result<Vec<Coding>, String> {
    let mut out = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let text = String::from_utf8_lossy(value.as_bytes());
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            out.push(match name.to_ascii_lowercase().as_str() {
                "identity" => continue,
                "gzip" | "x-gzip" => Coding::Gzip,
                "deflate" => Coding::Deflate,
                "br" => Coding::Brotli,
                "zstd" => Coding::Zstd,
                _ => return Err(name.to_owned()),
            });
        }
    }
    Ok(out)
}

/// The body with its codings undone, at most `limit` bytes of it.
pub(super) async fn decode(
    headers: &HeaderMap,
    bytes: Bytes,
    limit: usize,
) -> Result<Content, ApiError> {
    let codings = match codings(headers) {
        Ok(codings) if codings.is_empty() => return Ok(Content::Plain(bytes)),
        Ok(codings) => codings,
        Err(unknown) => return Ok(Content::Unknown(unknown)),
    };
    if bytes.len() < INLINE_BYTES {
        return undo(&codings, bytes, limit).map(Content::Plain);
    }
    crate::cpu::off_runtime(move || undo(&codings, bytes, limit))
        .await
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("decoding a request body panicked")))?
        .map(Content::Plain)
}

fn undo(codings: &[Coding], mut bytes: Bytes, limit: usize) -> Result<Bytes, ApiError> {
    for coding in codings.iter().rev() {
        bytes = undo_one(*coding, &bytes, limit)?.into();
    }
    Ok(bytes)
}

fn undo_one(coding: Coding, input: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let reader: Box<dyn Read + '_> = match coding {
        Coding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        // RFC 9110's "deflate" is zlib-wrapped; some clients send the raw stream.
        Coding::Deflate if input.first().is_some_and(|b| b & 0x0f == 8) => {
            Box::new(flate2::read::ZlibDecoder::new(input))
        }
        Coding::Deflate => Box::new(flate2::read::DeflateDecoder::new(input)),
        Coding::Brotli => Box::new(brotli_decompressor::Decompressor::new(input, 8192)),
        Coding::Zstd => return zstd_frames(input, limit),
    };
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit));
    // One byte past the limit tells a body at the limit from one over it.
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(coding, &e))?;
    if out.len() > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    Ok(out)
}

/// Every frame of a zstd body, in order (RFC 8878 §3.1: a body is a sequence of frames; skippable
/// frames hold nothing of the content). Bytes after the last frame that begin no frame are an
/// error, as zstd's own tool reports them, never ignored: a body is read whole or refused.
fn zstd_frames(mut input: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    let corrupt = |e: &dyn std::fmt::Display| corrupt(Coding::Zstd, e);
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit));
    let mut decoder = FrameDecoder::new();
    if input.is_empty() {
        return Err(corrupt(&"the body holds no zstd frame"));
    }
    while !input.is_empty() {
        match decoder.reset(&mut input) {
            Ok(()) => {}
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                let length = length as usize;
                if input.len() < length {
                    return Err(corrupt(&"a skippable frame ends past the body"));
                }
                input = &input[length..];
                continue;
            }
            Err(e) => return Err(corrupt(&e)),
        }
        while !decoder.is_finished() {
            decoder
                .decode_blocks(&mut input, BlockDecodingStrategy::UptoBytes(1 << 20))
                .map_err(|e| corrupt(&e))?;
            if let Some(chunk) = decoder.collect() {
                out.extend_from_slice(&chunk);
            }
            if out.len() > limit {
                return Err(ApiError::PayloadTooLarge { limit });
            }
        }
        if let Some(chunk) = decoder.collect() {
            out.extend_from_slice(&chunk);
        }
        if out.len() > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
    }
    Ok(out)
}

fn corrupt(coding: Coding, error: &dyn std::fmt::Display) -> ApiError {
    let name = match coding {
        Coding::Gzip => "gzip",
        Coding::Deflate => "deflate",
        Coding::Brotli => "br",
        Coding::Zstd => "zstd",
    };
    ApiError::Invalid {
        status: StatusCode::BAD_REQUEST,
        code: "invalid_content_encoding",
        message: format!("the body does not decode as its Content-Encoding {name}: {error}"),
        param: Some("Content-Encoding".into()),
    }
}

/// 415 for a body whose coding compactd does not read, where compactd must read it.
pub(super) fn unsupported(coding: &str) -> ApiError {
    ApiError::Invalid {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        code: "unsupported_content_encoding",
        message: format!(
            "the body's Content-Encoding {coding:?} is not one compactd reads (gzip, deflate, br, zstd)"
        ),
        param: Some("Content-Encoding".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn headers(coding: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_ENCODING, coding.parse().unwrap());
        headers
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn plain(content: Content) -> Vec<u8> {
        match content {
            Content::Plain(bytes) => bytes.to_vec(),
            Content::Unknown(name) => panic!("unknown coding {name}"),
        }
    }

    #[tokio::test]
    async fn every_coding_agents_send_is_undone_in_order() {
        let body = br#"{"model":"m","input":[]}"#.repeat(50);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        zlib.write_all(&body).unwrap();
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&body).unwrap();
        let mut br = Vec::new();
        brotli::BrotliCompress(&mut &body[..], &mut br, &Default::default()).unwrap();
        let zstd = ruzstd::encoding::compress_to_vec(
            &body[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        for (coding, encoded) in [
            ("gzip", gzip(&body)),
            ("deflate", zlib.finish().unwrap()),
            ("deflate", raw.finish().unwrap()),
            ("br", br),
            ("zstd", zstd),
            ("identity", body.clone()),
        ] {
            let decoded = decode(&headers(coding), encoded.into(), 1 << 20).await;
            assert_eq!(plain(decoded.unwrap()), body, "{coding}");
        }
        // Applied in order, undone in reverse.
        let twice = gzip(&gzip(&body));
        let decoded = decode(&headers("gzip, gzip"), twice.into(), 1 << 20).await;
        assert_eq!(plain(decoded.unwrap()), body);
    }

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[tokio::test]
    async fn a_zstd_body_is_every_frame_and_nothing_after_them() {
        let (a, b) = (br#"{"goal":"x","#.to_vec(), br#""prompt":"y"}"#.to_vec());
        let mut two = zstd(&a);
        two.extend(zstd(&b));
        let whole = [a.clone(), b.clone()].concat();
        let decoded = decode(&headers("zstd"), two.clone().into(), 1 << 20).await;
        assert_eq!(plain(decoded.unwrap()), whole);
        // A skippable frame (magic 0x184D2A5?, a length, that many bytes) holds no content.
        let mut skipping = zstd(&a);
        skipping.extend([0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        skipping.extend(zstd(&b));
        let decoded = decode(&headers("zstd"), skipping.into(), 1 << 20).await;
        assert_eq!(plain(decoded.unwrap()), whole);
        // Trailing bytes that begin no frame are an error, never ignored.
        let mut trailing = zstd(&whole);
        trailing.extend(b"garbage");
        let refused = decode(&headers("zstd"), trailing.into(), 1 << 20).await;
        assert!(
            matches!(&refused, Err(ApiError::Invalid { code, .. }) if *code == "invalid_content_encoding"),
            "{refused:?}"
        );
        // The limit holds across frames.
        let big = vec![b' '; 600 << 10];
        let mut frames = zstd(&big);
        frames.extend(zstd(&big));
        let refused = decode(&headers("zstd"), frames.into(), 1 << 20).await;
        assert!(matches!(refused, Err(ApiError::PayloadTooLarge { .. })));
    }

    #[tokio::test]
    async fn the_limit_holds_after_decoding_and_corrupt_bodies_are_named() {
        let bomb = gzip(&vec![b' '; 8 << 20]);
        assert!(bomb.len() < 64 << 10);
        let refused = decode(&headers("gzip"), bomb.into(), 1 << 20).await;
        assert!(matches!(
            refused,
            Err(ApiError::PayloadTooLarge { limit: 1048576 })
        ));
        let corrupt = decode(&headers("gzip"), Bytes::from_static(b"not gzip"), 1 << 20).await;
        match corrupt {
            Err(ApiError::Invalid { code, status, .. }) => {
                assert_eq!(code, "invalid_content_encoding");
                assert_eq!(status, StatusCode::BAD_REQUEST);
            }
            other => panic!("{other:?}"),
        }
        let unknown = decode(&headers("compress"), Bytes::from_static(b"x"), 10).await;
        assert!(matches!(unknown, Ok(Content::Unknown(name)) if name == "compress"));
    }
}
