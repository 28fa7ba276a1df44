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
        Coding::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(input).map_err(|e| corrupt(coding, &e))?,
        ),
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
