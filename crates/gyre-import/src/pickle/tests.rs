//! The pickle reader on hand-written pickles (each opcode family, and hostile inputs) and on
//! the torch archives of the slime fixtures.

use super::*;

fn read(bytes: &[u8]) -> Result<Pickle, PickleError> {
    Pickle::read(bytes, &mut NoPersistent)
}

fn err(bytes: &[u8]) -> String {
    read(bytes).unwrap_err().to_string()
}

fn fixture(p: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/import")
        .join(p)
}

#[test]
fn a_dict_of_scalars_and_lists() {
    // pickle.dumps({"a": [1, 300, 70000, -2], "b": (1.5, None, True), "c": b"xy"}, protocol=4)
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    p.extend([0x8c, 1, b'a', b']', 0x94, b'(', b'K', 1, b'M', 0x2c, 0x01]);
    p.extend([b'J', 0x70, 0x11, 0x01, 0x00, 0x8a, 1, 0xfe, b'e']);
    p.extend([0x8c, 1, b'b', b'G']);
    p.extend(1.5f64.to_be_bytes());
    p.extend([
        b'N', 0x88, 0x87, 0x8c, 1, b'c', b'C', 2, b'x', b'y', b'u', b'.',
    ]);
    let pk = read(&p).unwrap();
    let root = pk.root();
    assert_eq!(pk.keys(root), ["a", "b", "c"]);
    assert_eq!(
        pk.ints(pk.get(root, "a").unwrap()).unwrap(),
        [1, 300, 70000, -2]
    );
    let b = pk.items(pk.get(root, "b").unwrap()).unwrap();
    assert_eq!(pk.float(b[0]), Some(1.5));
    assert!(matches!(pk.node(b[1]), Node::None));
    assert_eq!(pk.int(b[2]), Some(1));
    assert!(matches!(pk.node(pk.get(root, "c").unwrap()), Node::Bytes(v) if v == b"xy"));
}

#[test]
fn memoised_objects_are_shared_and_filled_later() {
    // x = []; pickle.dumps([x, x]) after x.append(7): the pickler memoises x when it starts it.
    let p = [
        0x80, 4, b']', 0x94, b'(', b']', 0x94, b'K', 7, b'a', b'h', 1, b'e', b'.',
    ];
    let pk = read(&p).unwrap();
    let items = pk.items(pk.root()).unwrap();
    assert_eq!(items[0], items[1]);
    assert_eq!(pk.ints(items[1]).unwrap(), [7]);
}

#[test]
fn hostile_pickles_are_refused_with_what_they_met() {
    // A BINBYTES8 declaring 2^60 bytes: refused before anything is allocated.
    let mut p = vec![0x80, 4, 0x8e];
    p.extend((1u64 << 60).to_le_bytes());
    assert!(err(&p).contains("truncated: an argument of 1152921504606846976 bytes"));
    // Unknown globals, in both spellings.
    assert_eq!(
        err(b"\x80\x02cos\nsystem\n."),
        "unknown pickle global `os.system` (pickle byte 2)"
    );
    let mut p = vec![0x80, 4, 0x8c, 8];
    p.extend(b"builtins");
    p.extend([0x8c, 4]);
    p.extend(b"eval");
    p.extend([0x93, b'.']);
    assert!(err(&p).starts_with("unknown pickle global `builtins.eval`"));
    assert!(
        err(b"\x80\x02ctorch\nComplexFloatStorage\n.")
            .starts_with("unknown tensor dtype: storage type torch.ComplexFloatStorage")
    );
    // A memo read before it was written, an integer wider than 64 bits, protocol 0.
    assert!(err(b"\x80\x04h\x05.").contains("memo entry 5 read before it was written"));
    assert!(err(b"\x80\x04\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09.").contains("9 bytes"));
    assert!(err(b"I12\n.").contains("INT, protocol 0"));
    assert!(err(b"\x80\x01N.").contains("pickle protocol 1"));
    // No STOP, and a stack underflow.
    assert!(err(b"\x80\x04N").contains("ends before STOP"));
    assert!(err(b"\x80\x04a.").contains("stack underflow"));
    // Too many open MARKs.
    let mut p = vec![0x80, 4];
    p.extend(std::iter::repeat_n(b'(', limits::MARKS + 1));
    assert!(err(&p).contains("nested MARKs"));
    // A REDUCE of something that is not a known callable; a persistent id outside an archive.
    assert!(err(b"\x80\x04NNR.").contains("REDUCE calls a None"));
    assert!(err(b"\x80\x04NQ.").contains("persistent id in a plain pickle"));
}

#[test]
fn deep_nesting_is_read_without_recursion_and_shown_to_a_fixed_depth() {
    // (((…None,),),) a million deep: read without recursion, dropped without recursion.
    let mut p = vec![0x80, 4, b'N'];
    p.extend(std::iter::repeat_n(0x85, 1_000_000));
    p.push(b'.');
    let pk = read(&p).unwrap();
    let json = pk.to_json(pk.root()).to_string();
    assert_eq!(json.matches('[').count(), limits::JSON_DEPTH);
    assert!(json.contains("\"…\""));
}

#[test]
fn a_torch_archive_of_the_slime_fixture() {
    let file = std::fs::File::open(fixture("slime/dump/train_data/0.pt")).unwrap();
    let pk = pt::read(file).unwrap();
    let root = pk.root();
    assert_eq!(pk.int(pk.get(root, "format_version").unwrap()), Some(2));
    let samples = pk.items(pk.get(root, "samples").unwrap()).unwrap();
    assert_eq!(samples.len(), 5);
    let s = samples[0];
    let tokens = pk.ints(pk.get(s, "tokens").unwrap()).unwrap();
    let response = pk.int(pk.get(s, "response_lengths").unwrap()).unwrap();
    assert_eq!(tokens.len(), 33);
    assert_eq!(response, 7);
    assert_eq!(pk.ints(pk.get(s, "loss_masks").unwrap()).unwrap(), [1; 7]);
    let lp = pk.floats(pk.get(s, "log_probs").unwrap()).unwrap();
    assert_eq!(lp.len(), 7);
    assert!(lp.iter().all(|v| *v < 0.0));
    // rollout_mask_sums[i] is a 0-dim view into one storage shared by the rank's samples.
    assert_eq!(pk.float(pk.get(s, "rollout_mask_sums").unwrap()), Some(7.0));
}

#[test]
fn hostile_archives_are_one_line() {
    let open = |p: &str| pt::read(std::fs::File::open(fixture(p)).unwrap()).unwrap_err();
    assert!(open("slime/hostile/truncated.pt").starts_with("not a complete zip archive"));
    let e = open("slime/hostile/unknown-global.pt");
    assert!(e.contains("unknown pickle global `datetime.date`"), "{e}");
    let e = open("slime/hostile/unknown-dtype.pt");
    assert!(
        e.contains("unknown tensor dtype: storage type torch.ComplexFloatStorage"),
        "{e}"
    );
    for e in [open("slime/hostile/truncated.pt"), e] {
        assert!(!e.contains('\n'), "{e}");
    }
}
