#!/usr/bin/python3
"""Write schemas/vectors.json: wire-protocol test vectors.

The bytes are produced by the Python msgpack package (Debian's
python3-msgpack), an implementation independent of the C codec, so the C
tests check that both agree. Each vector lists its frames in hex (the header
first), what a receiver must conclude ("ok" or an error code from
schemas/protocol.json), and for valid messages the decoded header as JSON.
Run it after changing the protocol: /usr/bin/python3 schemas/gen_vectors.py
"""
import json
import os
import struct

import msgpack


def f32(*values):
    return struct.pack('<%df' % len(values), *values)


def hdr(type_, id_=7, version=1, **fields):
    h = {'version': version, 'type': type_, 'id': id_}
    h.update(fields)
    return h


def vec(name, header, frames=(), expect='ok', contains=None, raw=None, canonical=None):
    """canonical: the header as our encoders write the same message, when
    that differs from header's bytes (a float field sent as an integer is
    written back as a float64); the codec test re-encodes to these bytes."""
    data = raw if raw is not None else msgpack.packb(header)
    v = {'name': name, 'frames': [data.hex()] + [f.hex() for f in frames], 'expect': expect}
    if expect == 'ok':
        v['type'] = header['type']
        v['decoded'] = header
    if canonical is not None:
        v['canonical'] = msgpack.packb(canonical).hex()
    if contains:
        v['contains'] = contains
    return v


T23 = {'var': 'dense/kernel', 'part': 0, 'shape': [2, 3], 'bytes': 24}
T4 = {'var': 'dense/bias', 'part': 1, 'shape': [4], 'bytes': 16}
G23 = f32(1, -2, 3.5, 0.25, 0, -1e-3)
G4 = f32(0.5, 0.5, -0.5, 8)

# Embedding tables: an entry, its ids (uint64 little-endian) and rows.
SREF = {'table': 'emb_c1', 'count': 1, 'dim': 2}
SREF1 = SREF
IDS1 = struct.pack('<Q', 2**63 + 5)
IDS3 = struct.pack('<3Q', 1, 0xdeadbeef, 2**64 - 1)
ROW2 = f32(0.25, -1.5)
TFILE = {'table': 'emb_c1', 'shard': 1, 'shards': 2, 'file': 'emb_c1.shard1of2.full.table',
         'full': True, 'rows': 900, 'steps': 40}

PLAN = {'model': '{}', 'batch_size': 32, 'seed': 1, 'data_dir': '/data', 'train_limit': 0,
        'test_limit': 0, 'threads': 1, 'device': 'cpu', 'servers': ['tcp://127.0.0.1:5000'],
        'variables': [{'var': 'w', 'shape': [4], 'splits': [0, 4], 'servers': [0]}],
        'client_timeout_ms': 5000, 'steps_per_epoch': 10, 'total_steps': 100, 'eval_batch': 64,
        'overlap': False, 'mode': 'async'}

# The plan of a click-through-rate job: its data fields follow data_dir, in
# protocol.json's order, which the encoder keeps.
CRITEO_PLAN = {}
for key, value in PLAN.items():
    CRITEO_PLAN[key] = 'lr' if key == 'model' else value
    if key == 'data_dir':
        CRITEO_PLAN.update(data_format='criteo', train_data='/data/train.txt.gz',
                           test_data='/data/test.txt.gz')

vectors = [
    vec('ping', hdr('ping', 1)),
    vec('ping_ok', hdr('ping_ok', 1, server='ps:0', partitions=3)),
    vec('pull of two partitions', hdr('pull', parts=[{'var': 'dense/kernel', 'part': 0},
                                                      {'var': 'dense/bias', 'part': 1}])),
    vec('push of two tensors', hdr('push', step=12, worker=1, tensors=[T23, T4]), [G23, G4]),
    vec('push of a step of a sync round', hdr('push', step=9, worker=2, generation=3, round=4,
                                              round_steps=2, tensors=[T4]), [G4]),
    vec('push_pull with a large step id', hdr('push_pull', step=2**40 + 3, worker=0, tensors=[T4]), [G4]),
    vec('pull_ok with a version', hdr('pull_ok', tensors=[dict(T4, version=9)]), [G4]),
    vec('push_ok with a duplicate', hdr('push_ok', applied=[
        {'var': 'dense/kernel', 'part': 0, 'version': 5, 'duplicate': False},
        {'var': 'dense/bias', 'part': 1, 'version': 4, 'duplicate': True}])),
    vec('create glorot and constant', hdr('create', partitions=[
        {'var': 'conv2d/kernel', 'part': 0, 'shape': [3, 3, 1, 32], 'rows': [0, 2],
         'init': {'kind': 'glorot_uniform', 'seed': 42}},
        {'var': 'conv2d/bias', 'part': 0, 'shape': [32], 'rows': [0, 32],
         'init': {'kind': 'constant', 'value': 0.5}}])),
    vec('set_optimizer adam with an integer lr', hdr('set_optimizer', optimizer={
        'kind': 'adam', 'lr': 1, 'beta1': 0.9, 'epsilon': 1e-7, 'clip_norm': 5.0}),
        canonical=hdr('set_optimizer', optimizer={
            'kind': 'adam', 'lr': 1.0, 'beta1': 0.9, 'epsilon': 1e-7, 'clip_norm': 5.0})),
    vec('set_optimizer momentum nesterov', hdr('set_optimizer', optimizer={
        'kind': 'momentum', 'lr': 0.01, 'momentum': 0.9, 'nesterov': True})),
    vec('stats', hdr('stats')),
    # Fields in protocol.json's order, the order every encoder of ours writes.
    vec('stats_ok', hdr('stats_ok', partitions=[
        {'var': 'w', 'part': 0, 'shape': [4, 2], 'rows': [0, 4], 'updates': 3,
         'duplicates': 1, 'recorded': 3, 'bytes_in': 128, 'bytes_out': 96, 'nonfinite': 2}],
        requests=10, errors=1, pending=4096, refused=2, dropped=0, tables=[
            {'table': 'emb_c1', 'dim': 16, 'shard': 1, 'shards': 2, 'rows': 900, 'created': 1000,
             'evicted': 100, 'dropped': 37, 'oom': 3, 'pushes': 40, 'duplicates': 1, 'row_updates': 5000,
             'pulls': 6000, 'steps': 40, 'nonfinite': 0, 'bytes': 123456}])),
    vec('snapshot', hdr('snapshot', dir='ckpt-1')),
    vec('snapshot_ok', hdr('snapshot_ok', files=[
        {'var': 'w', 'part': 0, 'file': 'w.part0.snap', 'bytes': 200, 'crc32': 4294967295,
         'version': 3}], tables=[TFILE])),
    vec('restore without parts', hdr('restore', dir='ckpt-1')),
    vec('restore with parts', hdr('restore', dir='ckpt-1', parts=[{'var': 'w', 'part': 0}])),
    vec('snapshot incremental', hdr('snapshot', dir='ckpt-3', incremental=True, base='ckpt-1')),
    vec('restore of an incremental snapshot', hdr('restore', dir='ckpt-3', base='ckpt-1')),
    vec('restore that fences', hdr('restore', dir='ckpt-3', base='ckpt-1', generation=4)),
    vec('probe_root', hdr('probe_root', name='.probe-ps0-5', token='ps:0 9f3a')),
    vec('probe_root_ok', hdr('probe_root_ok', root='/shared/ckpt')),
    vec('restore_ok with a table', hdr('restore_ok', files=[], tables=[
        TFILE, dict(TFILE, file='emb_c1.shard1of2.incr.table', full=False, rows=7, steps=9)])),
    vec('table_create', hdr('table_create', tables=[
        {'name': 'emb_c1', 'dim': 16, 'init': {'kind': 'uniform', 'seed': 3, 'low': -0.05, 'high': 0.05},
         'optimizer': {'kind': 'ftrl', 'lr': 0.05, 'l1': 0.001, 'l2': 0.0, 'lr_power': -0.5},
         'admit_count': 2, 'admit_prob': 0.5, 'capacity': 1000000, 'ttl': 5000, 'policy': 'lfu',
         'shard_seed': 7},
        {'name': 'lr_w', 'dim': 1}], shard=1, shards=2)),
    vec('table_create_ok', hdr('table_create_ok', created=1, existing=1)),
    vec('sparse_pull of two tables', hdr('sparse_pull', tables=[dict(SREF, count=3), SREF1]),
        [IDS3, IDS1]),
    vec('sparse_pull_ok', hdr('sparse_pull_ok', tables=[SREF1]), [ROW2]),
    vec('sparse_push', hdr('sparse_push', step=12, worker=1, generation=2,
                           tables=[SREF1, dict(SREF, count=3, dim=1)]), [IDS1, ROW2, IDS3, f32(1, 2, 3)]),
    vec('sparse_push_ok', hdr('sparse_push_ok', applied=[
        {'table': 'emb_c1', 'applied': 3, 'created': 2, 'dropped': 1, 'duplicate': False}])),
    vec('sparse_push_pull', hdr('sparse_push_pull', step=3, worker=0, push=[SREF1],
                                pull=[dict(SREF, count=3)]), [IDS1, ROW2, IDS3]),
    vec('sparse_push_pull_ok', hdr('sparse_push_pull_ok', applied=[
        {'table': 'emb_c1', 'applied': 1, 'created': 0, 'dropped': 0, 'duplicate': True}],
        tables=[SREF1]), [ROW2]),
    vec('shutdown', hdr('shutdown')),
    vec('heartbeat', hdr('heartbeat', incarnation=2**40 + 5)),
    vec('heartbeat of a finished run', hdr('heartbeat', incarnation=9, done=True)),
    vec('register_ok with a plan', hdr('register_ok', coordinator=1, heartbeat_ms=100,
                                       timeout_ms=1000, plan=PLAN)),
    vec('error reply', hdr('error', code='bad_shape', message='push: tensors[0]: frame has 20 bytes')),

    vec('unknown version', hdr('ping', version=2), expect='bad_version', contains='version 2'),
    vec('missing version', {'type': 'ping', 'id': 1}, expect='bad_message', contains="'version'"),
    vec('unknown type', hdr('frobnicate'), expect='bad_message', contains="unknown message type 'frobnicate'"),
    vec('missing id', {'version': 1, 'type': 'ping'}, expect='bad_message', contains="missing field 'id'"),
    vec('missing field', hdr('push', worker=1, tensors=[T4]), [G4], expect='bad_message',
        contains="missing field 'step'"),
    vec('wrongly typed field', hdr('push', step='12', worker=1, tensors=[T4]), [G4],
        expect='bad_message', contains='step: expected uint, got str'),
    vec('negative step', hdr('push', step=-1, worker=1, tensors=[T4]), [G4],
        expect='bad_message', contains='step: expected uint, got negative int'),
    vec('nested wrong type', hdr('push', step=1, worker=1, tensors=[dict(T23, shape=[2, '3'])]), [G23],
        expect='bad_message', contains='tensors[0].shape[1]: expected uint, got str'),
    vec('heartbeat with done as an integer', hdr('heartbeat', incarnation=9, done=1),
        expect='bad_message', contains='done: expected bool, got'),
    vec('unknown field', hdr('ping', color='red'), expect='bad_message', contains="unknown field 'color'"),
    vec('unknown nested field', hdr('pull', parts=[{'var': 'w', 'part': 0, 'rows': [0, 1]}]),
        expect='bad_message', contains="unknown field 'rows'"),
    vec('fewer frames than tensors', hdr('push', step=1, worker=1, tensors=[T23, T4]), [G23],
        expect='bad_message', contains='describes 2 frames, got 1'),
    vec('frames on a message without tensors', hdr('ping'), [G4], expect='bad_message',
        contains='expected no frames'),
    vec('frame shorter than its description', hdr('push', step=1, worker=1, tensors=[T23]), [G23[:20]],
        expect='bad_shape', contains='frame has 20 bytes, header says 24'),
    vec('bytes disagree with the shape', hdr('push', step=1, worker=1, tensors=[dict(T23, bytes=20)]),
        [G23[:20]], expect='bad_shape', contains='needs 24 bytes'),
    vec('zero dimension', hdr('push', step=1, worker=1, tensors=[dict(T23, shape=[0, 3], bytes=0)]),
        [b''], expect='bad_shape', contains='dimension 0 is 0'),
    vec('rank above the limit', hdr('push', step=1, worker=1,
                                    tensors=[dict(T4, shape=[1] * 9, bytes=4)]), [f32(1)],
        expect='bad_shape', contains='rank'),
    vec('not msgpack', None, raw=b'\xc1\x00\x01', expect='bad_message', contains='not valid msgpack'),
    vec('truncated header', None, raw=msgpack.packb(hdr('ping'))[:-2], expect='bad_message',
        contains='not complete msgpack'),
    vec('trailing bytes after the header', None, raw=msgpack.packb(hdr('ping')) + b'\x00',
        expect='bad_message', contains='after the msgpack value'),
    vec('array claiming 2^32-1 elements', None, raw=b'\xdd\xff\xff\xff\xff', expect='bad_message',
        contains='declares more elements than it holds'),
    vec('map claiming 2^32-1 entries', None, raw=b'\xdf\xff\xff\xff\xff', expect='bad_message',
        contains='declares more elements than it holds'),
    vec('nested array claiming 65535 elements', None,
        raw=b'\x84' + msgpack.packb('version') + b'\x01' + msgpack.packb('type') + msgpack.packb('pull')
            + msgpack.packb('id') + b'\x07' + msgpack.packb('parts') + b'\xdc\xff\xff',
        expect='bad_message', contains='declares more elements'),
    vec('version is a string', hdr('ping', version='1'), expect='bad_message',
        contains="field 'version' is a str, expected uint"),
    vec('header is not a map', None, raw=msgpack.packb([1, 'ping', 7]), expect='bad_message',
        contains='expected a map'),
    vec('duplicate key', None,
        raw=b'\x84' + msgpack.packb('version') + b'\x01' + msgpack.packb('type') + msgpack.packb('ping')
            + msgpack.packb('id') + b'\x07' + msgpack.packb('id') + b'\x08',
        expect='bad_message', contains="'id' appears twice"),
    vec('non-string key', None, raw=b'\x84\x01\x01' + msgpack.packb('version') + b'\x01'
        + msgpack.packb('type') + msgpack.packb('ping') + msgpack.packb('id') + b'\x07',
        expect='bad_message', contains='map key 0 is a uint'),

    # Values of the right type outside their field's bounds (protocol.json's
    # minimum, maximum, finite, enum, maxLength, minItems, maxItems): refused
    # as invalid, naming the message, the field and the bound.
    vec('round_steps of 0', hdr('push', step=1, worker=0, round=1, round_steps=0, tensors=[T4]),
        [G4], expect='invalid', contains='push: round_steps: 0 is out of bounds, expected 1 to 4294967295'),
    vec('round_steps above 2^32-1', hdr('push', step=1, worker=0, round=1, round_steps=2**32,
                                         tensors=[T4]), [G4], expect='invalid',
        contains='push: round_steps: 4294967296 is out of bounds, expected 1 to 4294967295'),
    vec('round 0', hdr('push', step=1, worker=0, round=0, round_steps=1, tensors=[T4]), [G4],
        expect='invalid', contains='push: round: 0 is out of bounds, expected at least 1'),
    vec('fence at generation 0', hdr('fence', generation=0), expect='invalid',
        contains='fence: generation: 0 is out of bounds, expected at least 1'),
    vec('restore fencing at generation 0', hdr('restore', dir='ckpt-1', generation=0),
        expect='invalid', contains='restore: generation: 0 is out of bounds, expected at least 1'),
    vec('partition index above 2^32-1', hdr('pull', parts=[{'var': 'w', 'part': 0},
                                                          {'var': 'w', 'part': 2**32}]),
        expect='invalid',
        contains='pull: parts[1].part: 4294967296 is out of bounds, expected at most 4294967295'),
    vec('variable name of 128 bytes', hdr('push', step=1, worker=0,
                                           tensors=[dict(T4, var='v' * 128)]), [G4],
        expect='invalid',
        contains='push: tensors[0].var: a str of 128 bytes is out of bounds, expected at most 127'),
    vec('probe file name of 256 bytes', hdr('probe_root', name='p' * 256, token='t'),
        expect='invalid',
        contains='probe_root: name: a str of 256 bytes is out of bounds, expected at most 255'),
    vec('learning rate NaN', hdr('set_optimizer', optimizer={'kind': 'sgd', 'lr': float('nan')}),
        expect='invalid',
        contains='set_optimizer: optimizer.lr: nan is out of bounds, expected a finite number'),
    vec('learning rate infinite', hdr('work', kind='train', step=1, epoch=0, batch=0, generation=1,
                                      wait_ms=0, lr=float('inf')),
        expect='invalid', contains='work: lr: inf is out of bounds, expected a finite number'),
    vec('unknown optimizer', hdr('set_optimizer', optimizer={'kind': 'rmsprop'}), expect='invalid',
        contains="set_optimizer: optimizer.kind: 'rmsprop' is out of bounds, expected one of "
                 "sgd, momentum, adagrad, adam"),
    vec('unknown role', hdr('register', role='chief', index=0, incarnation=1, endpoint='', pid=1),
        expect='invalid', contains="register: role: 'chief' is out of bounds, expected one of "
                                   "ps, worker, evaluator"),
    vec('negative compute time', hdr('work_request', want=1, reports=[
        {'kind': 'train', 'status': 'done', 'step': 1, 'generation': 1, 'loss': 0.5,
         'correct': 1, 'count': 2, 'applied': 1, 'duplicates': 0, 'compute_ms': -1.5,
         'comm_ms': 0.0}]), expect='invalid',
        contains='work_request: reports[0].compute_ms: -1.5 is out of bounds, expected a finite '
                 'number of at least 0'),
    vec('eval report with an AUC', hdr('work_request', reports=[
        {'kind': 'eval', 'status': 'done', 'step': 40, 'generation': 1, 'loss': 512.25,
         'correct': 800, 'count': 1000, 'applied': 0, 'duplicates': 0, 'compute_ms': 12.5,
         'comm_ms': 3.0, 'auc': 0.8125}], want=1)),
    vec('AUC above 1', hdr('work_request', want=1, reports=[
        {'kind': 'eval', 'status': 'done', 'step': 40, 'generation': 1, 'loss': 512.25,
         'correct': 800, 'count': 1000, 'applied': 0, 'duplicates': 0, 'compute_ms': 12.5,
         'comm_ms': 3.0, 'auc': 1.5}]), expect='invalid',
        contains='work_request: reports[0].auc: 1.5 is out of bounds, expected 0 to 1'),
    vec('rows of three numbers', hdr('create', partitions=[
        {'var': 'w', 'part': 0, 'shape': [4], 'rows': [0, 2, 4], 'init': {'kind': 'zeros'}}]),
        expect='invalid', contains='create: partitions[0].rows: an array of 3 items is out of '
                                   'bounds, expected exactly 2'),
    vec('row above 2^63-1', hdr('create', partitions=[
        {'var': 'w', 'part': 0, 'shape': [4], 'rows': [0, 2**63], 'init': {'kind': 'zeros'}}]),
        expect='invalid', contains='create: partitions[0].rows[1]: 9223372036854775808 is out of '
                                   'bounds, expected at most 9223372036854775807'),
    vec('ring root below -1', hdr('work', kind='ring', step=0, epoch=0, batch=0, generation=1,
                                  wait_ms=0, ring={'rank': 0, 'members': ['tcp://a:1'],
                                                   'tasks': [0], 'root': -2, 'load': ''}),
        expect='invalid', contains='work: ring.root: -2 is out of bounds, expected at least -1'),
    vec('plan of an unknown mode', hdr('register_ok', coordinator=1, heartbeat_ms=100,
                                       timeout_ms=1000, plan=dict(PLAN, mode='ssp')),
        expect='invalid', contains="register_ok: plan.mode: 'ssp' is out of bounds, expected one "
                                   "of async, mirrored, sync"),
    vec('plan of batch 0', hdr('register_ok', coordinator=1, heartbeat_ms=100, timeout_ms=1000,
                               plan=dict(PLAN, batch_size=0)),
        expect='invalid', contains='register_ok: plan.batch_size: 0 is out of bounds, expected 1 '
                                   'to 1048576'),
    vec('plan of Criteo data', hdr('register_ok', coordinator=1, heartbeat_ms=100,
                                   timeout_ms=1000,
                                   plan=CRITEO_PLAN)),
    vec('plan of an unknown data format', hdr('register_ok', coordinator=1, heartbeat_ms=100,
                                              timeout_ms=1000, plan=dict(PLAN, data_format='parquet')),
        expect='invalid', contains="register_ok: plan.data_format: 'parquet' is out of bounds, "
                                   "expected one of idx, criteo, libsvm, csv"),
    vec('sparse_pull with one frame too few', hdr('sparse_pull', tables=[SREF1, SREF1]), [IDS1],
        expect='bad_message', contains="sparse_pull: 'tables' describes 2 frames, got 1"),
    vec('sparse_pull ids frame of a wrong size', hdr('sparse_pull', tables=[dict(SREF, count=2)]),
        [IDS3], expect='bad_shape',
        contains='sparse_pull: tables[0]: ids frame has 24 bytes, expected 2 ids of 8 bytes'),
    vec('sparse_push rows frame of a wrong size', hdr('sparse_push', step=1, worker=0,
                                                      tables=[SREF1]), [IDS1, f32(1)],
        expect='bad_shape',
        contains='sparse_push: tables[0]: rows frame has 4 bytes, expected 1 rows of 8 bytes'),
    vec('sparse_push of a huge count', hdr('sparse_push', step=1, worker=0,
                                           tables=[dict(SREF, count=2**62)]), [IDS1, ROW2],
        expect='bad_shape', contains='ids frame has 8 bytes, expected 4611686018427387904 ids'),
    vec('table dim of 0', hdr('table_create', tables=[{'name': 'e', 'dim': 0}], shard=0, shards=1),
        expect='invalid', contains='table_create: tables[0].dim: 0 is out of bounds, expected 1 to 4096'),
    vec('table_create of 0 shards', hdr('table_create', tables=[], shard=0, shards=0),
        expect='invalid', contains='table_create: shards: 0 is out of bounds'),
    vec('unknown row optimizer', hdr('table_create', tables=[
        {'name': 'e', 'dim': 4, 'optimizer': {'kind': 'momentum'}}], shard=0, shards=1),
        expect='invalid', contains="tables[0].optimizer.kind: 'momentum' is out of bounds"),
    vec('snapshot dir of 1025 bytes', hdr('snapshot', dir='d' * 1025), expect='invalid',
        contains='snapshot: dir: a str of 1025 bytes is out of bounds, expected at most 1024'),
]

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, 'vectors.json'), 'w') as out:
    json.dump({'generator': 'schemas/gen_vectors.py (python3-msgpack %s)' % '.'.join(map(str, msgpack.version)),
               'vectors': vectors}, out, indent=1)
    out.write('\n')
print('%d vectors written' % len(vectors))
