//! The two S3 XML documents Nivis reads: an `Error` and a `ListBucketResult` page.
//!
//! Owns: pulling the few fields used out of them with `quick-xml` (entities resolved, namespaces
//! ignored). Not: HTTP, nor deciding what an error means (see `client`).

use quick_xml::events::Event;
use quick_xml::Reader;

/// `<Error><Code>…</Code><Message>…</Message></Error>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ErrorDocument {
    pub(crate) code: String,
    pub(crate) message: String,
}

/// One page of a ListObjectsV2 answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct ListPage {
    /// `Contents/Key`, in order.
    pub(crate) keys: Vec<String>,
    /// `IsTruncated`.
    pub(crate) truncated: bool,
    /// `NextContinuationToken`.
    pub(crate) next: Option<String>,
}

/// The error document in `body`, if it is one.
pub(super) fn error_document(body: &[u8]) -> Option<ErrorDocument> {
    let mut doc = ErrorDocument {
        code: String::new(),
        message: String::new(),
    };
    let root = walk(body, |path, piece| match (path, piece) {
        ([_, field], Piece::Text(text)) if field == "Code" => doc.code.push_str(text),
        ([_, field], Piece::Text(text)) if field == "Message" => doc.message.push_str(text),
        _ => {}
    })?;
    (root == "Error" && !doc.code.is_empty()).then_some(doc)
}

/// The listing page in `body`, if it is one.
pub(super) fn list_page(body: &[u8]) -> Option<ListPage> {
    let mut page = ListPage::default();
    let mut truncated = String::new();
    let mut next = String::new();
    let root = walk(body, |path, piece| {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        match (path.as_slice(), piece) {
            ([_, "Contents", "Key"], Piece::Open) => page.keys.push(String::new()),
            // A key's text can come in several pieces (around entity references).
            ([_, "Contents", "Key"], Piece::Text(text)) => {
                if let Some(key) = page.keys.last_mut() {
                    key.push_str(text);
                }
            }
            ([_, "IsTruncated"], Piece::Text(text)) => truncated.push_str(text),
            ([_, "NextContinuationToken"], Piece::Text(text)) => next.push_str(text),
            _ => {}
        }
    })?;
    if root != "ListBucketResult" {
        return None;
    }
    page.truncated = truncated.trim() == "true";
    page.next = (!next.is_empty()).then_some(next);
    Some(page)
}

/// What [`walk`] reports at a path.
enum Piece<'a> {
    /// An element opens.
    Open,
    /// A piece of text inside it (entities resolved).
    Text(&'a str),
}

/// Calls `visit(path, piece)` for every element start and piece of text, with the path of
/// element names (namespaces dropped) leading to it; returns the root element's name, or `None`
/// if `body` is not well-formed XML.
fn walk(body: &[u8], mut visit: impl FnMut(&[String], Piece<'_>)) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let mut reader = Reader::from_str(text);
    let mut path: Vec<String> = Vec::new();
    let mut root = None;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_string();
                root.get_or_insert_with(|| name.clone());
                path.push(name);
                visit(&path, Piece::Open);
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Empty(e) => {
                let name = e.local_name().as_ref().to_string();
                root.get_or_insert(name);
            }
            Event::Text(t) => visit(&path, Piece::Text(&t.xml10_content())),
            Event::CData(t) => {
                visit(&path, Piece::Text(&t.into_inner()));
            }
            Event::GeneralRef(r) => {
                let piece = match r.resolve_char_ref().ok()? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(&r)?.to_string(),
                };
                visit(&path, Piece::Text(&piece));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    path.is_empty().then_some(root).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_error_documents() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><Resource>/b</Resource></Error>"#;
        assert_eq!(
            error_document(body),
            Some(ErrorDocument {
                code: "NoSuchBucket".into(),
                message: "The specified bucket does not exist".into()
            })
        );
        assert_eq!(error_document(b"<html><body>404</body></html>"), None);
        assert_eq!(error_document(b"not xml at all {"), None);
        assert_eq!(error_document(b""), None);
    }

    #[test]
    fn reads_listing_pages_with_entities() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>
<KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>
<NextContinuationToken>tok&amp;1</NextContinuationToken>
<Contents><Key>p/a&amp;b</Key><ETag>"x"</ETag></Contents>
<Contents><Key>p/c&#233;</Key></Contents></ListBucketResult>"#;
        let page = list_page(body).unwrap();
        assert_eq!(page.keys, ["p/a&b", "p/cé"]);
        assert!(page.truncated);
        assert_eq!(page.next.as_deref(), Some("tok&1"));
        let empty = br#"<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>"#;
        assert_eq!(list_page(empty), Some(ListPage::default()));
        assert_eq!(list_page(b"<Error><Code>X</Code></Error>"), None);
        assert_eq!(list_page(b"<html>"), None);
    }
}
