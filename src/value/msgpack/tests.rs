use super::*;

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn unhex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect()
}

fn num(s: &str) -> Value {
    Value::Number(s.parse().unwrap())
}

fn obj(attrs: &[(&str, Type)]) -> Type {
    Type::object(
        attrs
            .iter()
            .map(|(k, t)| (k.to_string(), t.clone()))
            .collect(),
    )
}

fn list(t: Type) -> Type {
    Type::List(Box::new(t))
}

#[test]
fn spec_byte_examples() {
    let ty = obj(&[("a", Type::String), ("b", Type::String)]);
    let v = Value::object([("a", Value::from("x")), ("b", Value::Null)]);
    assert_eq!(hex(&encode(&v, &ty).unwrap()), "82 a1 61 a1 78 a1 62 c0");
    assert_eq!(
        hex(&encode(&Value::from("a"), &Type::Dynamic).unwrap()),
        "92 c4 08 22 73 74 72 69 6e 67 22 a1 61"
    );
    assert_eq!(
        hex(&encode(&Value::from(300i64), &Type::Number).unwrap()),
        "cd 01 2c"
    );
    assert_eq!(
        hex(&encode(&Value::from(-1i64), &Type::Number).unwrap()),
        "ff"
    );
    assert_eq!(
        hex(&encode(&num("1.5"), &Type::Number).unwrap()),
        "cb 3f f8 00 00 00 00 00 00"
    );
    assert_eq!(
        hex(&encode(&Value::Unknown, &Type::String).unwrap()),
        "d4 00 00"
    );
    assert_eq!(hex(&encode(&Value::Null, &ty).unwrap()), "c0");
    assert_eq!(
        hex(&encode(&Value::Unknown, &Type::Dynamic).unwrap()),
        "d4 00 00"
    );
    assert_eq!(hex(&encode(&Value::Null, &Type::Dynamic).unwrap()), "c0");
}

#[test]
fn integers_are_compact() {
    for (n, want) in [
        (0i64, "00"),
        (127, "7f"),
        (128, "cc 80"),
        (255, "cc ff"),
        (256, "cd 01 00"),
        (65536, "ce 00 01 00 00"),
        (1 << 32, "cf 00 00 00 01 00 00 00 00"),
        (-32, "e0"),
        (-33, "d0 df"),
        (-129, "d1 ff 7f"),
        (-40000, "d2 ff ff 63 c0"),
        (i64::MIN, "d3 80 00 00 00 00 00 00 00"),
    ] {
        assert_eq!(
            hex(&encode(&Value::from(n), &Type::Number).unwrap()),
            want,
            "{n}"
        );
        assert_eq!(decode(&unhex(want), &Type::Number).unwrap(), Value::from(n));
    }
}

#[test]
fn numbers_that_are_not_int64() {
    // An integer written with a fraction is still an int on the wire.
    assert_eq!(hex(&encode(&num("2.0"), &Type::Number).unwrap()), "02");
    // Not exactly a float64: decimal text.
    assert_eq!(
        hex(&encode(&num("0.1"), &Type::Number).unwrap()),
        "a3 30 2e 31"
    );
    let big = "123456789012345678901234567890";
    let bytes = encode(&num(big), &Type::Number).unwrap();
    assert_eq!(bytes[0], 0xa0 | big.len() as u8);
    assert_eq!(decode(&bytes, &Type::Number).unwrap(), num(big));
    // 2^63 is exactly a float64.
    assert_eq!(
        hex(&encode(&num("9223372036854775808"), &Type::Number).unwrap()),
        "cb 43 e0 00 00 00 00 00 00"
    );
    // Exponent text is normalized before choosing.
    assert_eq!(hex(&encode(&num("1e2"), &Type::Number).unwrap()), "64");
    // Decimal text of 32 bytes or more travels as a str8 (a length byte after the marker),
    // and comes back whole.
    let longer = "1234567890123456789012345678901234567890.5";
    let bytes = encode(&num(longer), &Type::Number).unwrap();
    assert_eq!(&bytes[..2], &[0xd9, longer.len() as u8]);
    assert_eq!(decode(&bytes, &Type::Number).unwrap(), num(longer));
}

#[test]
fn number_decoding_accepts_every_form() {
    let d = |s: &str| decode(&unhex(s), &Type::Number).unwrap();
    assert_eq!(d("cf ff ff ff ff ff ff ff ff"), num("18446744073709551615"));
    assert_eq!(d("ca 3f c0 00 00"), num("1.5"));
    assert_eq!(d("ca 3d cc cc cd"), num("0.10000000149011612"));
    assert_eq!(d("cb 3f b9 99 99 99 99 99 9a"), num("0.1"));
    assert_eq!(d("cb 40 00 00 00 00 00 00 00"), num("2"));
    assert_eq!(d("a4 31 65 2b 33"), num("1000"));
    assert_eq!(d("d0 80"), Value::from(-128i64));
    let err = decode(&unhex("a3 61 62 63"), &Type::Number).unwrap_err();
    assert!(err.message.contains("invalid number text"), "{err}");
    let err = decode(&unhex("cb 7f f0 00 00 00 00 00 00"), &Type::Number).unwrap_err();
    assert!(err.message.contains("unsupported number"), "{err}");
}

#[test]
fn unknowns_decode_from_any_ext() {
    assert_eq!(
        decode(&unhex("d4 00 00"), &Type::String).unwrap(),
        Value::Unknown
    );
    // Refined unknown: string known not null.
    assert_eq!(
        decode(&unhex("c7 03 0c 81 01 c2"), &Type::String).unwrap(),
        Value::Unknown
    );
    assert_eq!(
        decode(&unhex("d5 05 01 02"), &Type::Number).unwrap(),
        Value::Unknown
    );
    // Bare ext at a dynamic slot is a wholly unknown dynamic value.
    assert_eq!(
        decode(&unhex("d4 00 00"), &Type::Dynamic).unwrap(),
        Value::Unknown
    );
    let ty = obj(&[("a", Type::String), ("b", list(Type::Number))]);
    let v = decode(
        &unhex("82 a1 61 c7 03 0c 81 01 c2 a1 62 92 01 d4 00 00"),
        &ty,
    )
    .unwrap();
    assert_eq!(
        v,
        Value::object([
            ("a", Value::Unknown),
            ("b", Value::List(vec![Value::from(1i64), Value::Unknown]))
        ])
    );
}

#[test]
fn strict_objects_name_the_attributes() {
    let ty = obj(&[
        ("a", Type::String),
        ("b", Type::String),
        ("id", Type::String),
    ]);
    // Missing "id".
    let err = decode(&unhex("82 a1 61 c0 a1 62 c0"), &ty).unwrap_err();
    assert_eq!(
        err.message,
        r#"an object with 3 attributes is required (2 given); missing "id""#
    );
    // "idd" instead of "id".
    let err = decode(&unhex("83 a1 61 c0 a1 62 c0 a3 69 64 64 92 01 02"), &ty).unwrap_err();
    assert_eq!(
        err.message,
        r#"an object with 3 attributes is required (3 given); missing "id"; unexpected "idd""#
    );
    // An empty map is not an object of nulls.
    let err = decode(&unhex("80"), &ty).unwrap_err();
    assert!(err.message.contains("(0 given)"), "{err}");
    // Nested errors carry the path.
    let outer = obj(&[("disk", list(obj(&[("size", Type::Number)])))]);
    let err = decode(
        &unhex("81 a4 64 69 73 6b 91 81 a4 73 69 7a 65 a1 78"),
        &outer,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"at disk[0].size: invalid number text "x""#
    );
    // Encoding is as strict.
    let err = encode(&Value::object([("a", Value::Null)]), &ty).unwrap_err();
    assert!(err.message.contains(r#"missing "b", "id""#), "{err}");
    let err = encode(
        &Value::object([(
            "disk",
            Value::List(vec![Value::object([("size", Value::from("x"))])]),
        )]),
        &outer,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"at disk[0].size: expected number, got string "x""#
    );
}

#[test]
fn malformed_input() {
    assert!(decode(&[], &Type::String).is_err());
    assert!(decode(&unhex("a3 61"), &Type::String).is_err());
    assert!(decode(&unhex("a1 61 00"), &Type::String)
        .unwrap_err()
        .message
        .contains("unexpected bytes"));
    assert!(decode(&unhex("92 01"), &Type::Tuple(vec![Type::Number])).is_err());
    assert!(decode(&unhex("a1 ff"), &Type::String)
        .unwrap_err()
        .message
        .contains("UTF-8"));
    assert!(decode(&unhex("91 c4 01 22"), &Type::Dynamic).is_err());
}

#[test]
fn round_trips_for_every_type() {
    let inner = obj(&[
        ("n", Type::Number),
        ("s", Type::Set(Box::new(Type::String))),
    ]);
    let ty = obj(&[
        ("b", Type::Bool),
        ("d", Type::Dynamic),
        ("dl", Type::Dynamic),
        ("dm", Type::Dynamic),
        ("dn", Type::Dynamic),
        ("l", list(inner.clone())),
        ("m", Type::Map(Box::new(Type::Number))),
        (
            "t",
            Type::Tuple(vec![Type::String, Type::Bool, Type::Dynamic]),
        ),
        ("o", inner),
        ("u", Type::String),
    ]);
    let v = Value::object([
        ("b", Value::from(true)),
        ("d", Value::from("dyn")),
        (
            "dl",
            Value::List(vec![Value::from(1i64), Value::from("x"), Value::Null]),
        ),
        (
            "dm",
            Value::object([
                ("k", Value::List(vec![Value::from(false)])),
                ("z", Value::Unknown),
            ]),
        ),
        ("dn", Value::Null),
        (
            "l",
            Value::List(vec![Value::object([
                ("n", num("3.25")),
                ("s", Value::List(vec![Value::from("a"), Value::from("b")])),
            ])]),
        ),
        (
            "m",
            Value::object([("x", Value::from(1i64)), ("y", num("-7.5"))]),
        ),
        (
            "t",
            Value::List(vec![
                Value::from("s"),
                Value::from(false),
                Value::List(vec![]),
            ]),
        ),
        (
            "o",
            Value::object([("n", Value::Null), ("s", Value::Unknown)]),
        ),
        ("u", Value::Unknown),
    ]);
    let bytes = encode(&v, &ty).unwrap();
    let back = decode(&bytes, &ty).unwrap();
    assert_eq!(back, v);
    // The decoded value records the dynamic types and re-encodes byte for byte.
    assert!(matches!(
        back.get_attr("dl"),
        Some(Value::Dynamic {
            ty: Type::Tuple(_),
            ..
        })
    ));
    assert_eq!(encode(&back, &ty).unwrap(), bytes);
    // Wholly unknown and null dynamic values are bare.
    assert_eq!(back.get_attr("dn"), Some(&Value::Null));
}

#[test]
fn nested_dynamic_wrappers_survive() {
    // ["object",{"x":"dynamic"}] wrapping {x: ["number", 5]}, as decoded from a provider.
    let ty = Type::Dynamic;
    let v = Value::Dynamic {
        ty: obj(&[("x", Type::Dynamic)]),
        value: Box::new(Value::object([(
            "x",
            Value::Dynamic {
                ty: Type::Number,
                value: Box::new(Value::from(5i64)),
            },
        )])),
    };
    let bytes = encode(&v, &ty).unwrap();
    let mut want = vec![0x92, 0xc4];
    let tj = br#"["object",{"x":"dynamic"}]"#;
    want.push(tj.len() as u8);
    want.extend_from_slice(tj);
    want.extend_from_slice(&[0x81, 0xa1, b'x', 0x92, 0xc4, 0x08]);
    want.extend_from_slice(br#""number""#);
    want.push(0x05);
    assert_eq!(hex(&bytes), hex(&want));
    // Without the outer wrapper the type is inferred from the value: object({x=number}).
    let bare = v.unwrap_dynamic().clone();
    let inferred = encode(&bare, &ty).unwrap();
    assert_eq!(&inferred[3..3 + 25], br#"["object",{"x":"number"}]"#);
    let back = decode(&bytes, &ty).unwrap();
    assert_eq!(encode(&back, &ty).unwrap(), bytes);
    // A typed unknown and a typed null in a dynamic slot stay wrapped.
    for inner in [Value::Unknown, Value::Null] {
        let v = Value::Dynamic {
            ty: Type::String,
            value: Box::new(inner),
        };
        let bytes = encode(&v, &Type::Dynamic).unwrap();
        assert_eq!(&bytes[..11], &unhex("92 c4 08 22 73 74 72 69 6e 67 22")[..]);
        assert_eq!(
            encode(&decode(&bytes, &Type::Dynamic).unwrap(), &Type::Dynamic).unwrap(),
            bytes
        );
    }
}

#[test]
fn long_lengths() {
    let s = "x".repeat(40);
    let b = encode(&Value::from(s.as_str()), &Type::String).unwrap();
    assert_eq!(&b[..2], &[0xd9, 40]);
    let s = "y".repeat(300);
    let b = encode(&Value::from(s.as_str()), &Type::String).unwrap();
    assert_eq!(&b[..3], &[0xda, 0x01, 0x2c]);
    assert_eq!(decode(&b, &Type::String).unwrap(), Value::from(s.as_str()));
    let items = Value::List((0..20i64).map(Value::from).collect());
    let b = encode(&items, &list(Type::Number)).unwrap();
    assert_eq!(&b[..3], &[0xdc, 0x00, 0x14]);
    assert_eq!(decode(&b, &list(Type::Number)).unwrap(), items);
    let m = Value::Map(
        (0..17)
            .map(|i| (format!("k{i:02}"), Value::from(i as i64)))
            .collect(),
    );
    let mt = Type::Map(Box::new(Type::Number));
    let b = encode(&m, &mt).unwrap();
    assert_eq!(&b[..3], &[0xde, 0x00, 0x11]);
    assert_eq!(decode(&b, &mt).unwrap(), m);
    // bin accepted for strings.
    assert_eq!(
        decode(&unhex("c4 01 61"), &Type::String).unwrap(),
        Value::from("a")
    );
}

#[test]
fn unexpected_values_are_skipped_to_report_all_names() {
    let ty = obj(&[("a", Type::String)]);
    // {"a": nil, "zz": {"q": [1, 2.5, "s", ext]}}
    let bytes =
        unhex("82 a1 61 c0 a2 7a 7a 81 a1 71 94 01 cb 40 04 00 00 00 00 00 00 a1 73 d4 00 00");
    let err = decode(&bytes, &ty).unwrap_err();
    assert_eq!(
        err.message,
        r#"an object with 1 attributes is required (2 given); unexpected "zz""#
    );
}
