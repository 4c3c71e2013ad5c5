/*
 * dre_proto.h: the DRE encoded stream format (what a dre_enc emits and a dre_dec
 * reads; inside the tunnel it is the payload of a stream's DATA frames).
 *
 * stream  := HEADER FRAME*
 * HEADER  := "WDRE" u8 version u8 flags(0) u64 seed          (14 bytes)
 * FRAME   := u8 DRE_FRAME_MAGIC u8 type varint raw_len varint ops_len
 *            varint lit_len u8 lz varint lz_len u64 sum
 *            ops[ops_len] lz_payload[lz_len]
 *   raw_len  bytes the frame decodes to (<= DRE_FRAME_RAW_MAX)
 *   ops      the op list below, never compressed
 *   lit_len  bytes of the literal section once decompressed (<= raw_len)
 *   lz       enum dre_proto_lz: how the literal section is coded; zstd and lz4
 *            sections continue one compression stream per direction of a stream
 *            (window carried across frames), so frames decode in order only
 *   sum      checksum of the decoded bytes with seed ^ frame sequence number:
 *            version 2 and later dre_fsum (dre/fsum.c), version 1 dre_sum64 (XXH64);
 *            frames are numbered from 1 in stream order, LEARN frames excepted
 * Integers are little-endian; varints are LEB128 (at most 10 bytes).
 *
 * Ops of a DATA frame (the decoder keeps a cursor: the last chunk of the
 * sender's history it used, and `prev`: the last chunk it output):
 *   LIT  len           new chunk from the literal section; stored
 *   RAW  len           bytes from the literal section, not stored (short tails)
 *   REF  u64 tag       a stored chunk, named by the first 8 bytes of its SHA-256;
 *                      the cursor moves to it
 *   RUN  count         the `count` chunks that follow the cursor in store order
 *                      (each chunk remembers the chunk that followed it)
 *   SKIP skip count    as RUN after passing over `skip` chunks
 *   DELTA len n ins*n  new chunk of `len` bytes rebuilt from a base window: the
 *                      cursor chunk and those following it, DRE_DELTA_WIN bytes at most;
 *                      ins := varint lit, varint copy_len, zigzag varint
 *                      (copy_off - expected) where expected is where the previous
 *                      copy ended plus lit; lit bytes come from the literal
 *                      section.  Stored; the cursor moves to the base chunk
 *                      holding the last copied byte.
 *   DELTAR u64 tag len n ins*n   as DELTA, the window starting at chunk `tag`
 *   AGAIN count        (version 3) the cursor chunk, `count` times; the cursor
 *                      stays (a chunk is never its own successor, so a run cannot
 *                      repeat one: zero-filled regions, say)
 * After each output chunk X (not RAW), if `prev` has no successor yet, X becomes
 * its successor on both sides.
 *
 * A LEARN frame answers an ask for frame `seq`: its ops are
 *   u64 seq, u64 cursor tag after that frame (0 none), u64 the chunk output
 *   just before that frame (0 none), then per chunk:
 *   CHUNK len (stored if absent), CHUNKL len (the same, and it follows the
 *   previous chunk in the sender's order: the receiver relinks to match) or
 *   RAW len, bytes in the literal section; or (version 3) HELD u64 tag and
 *   HELDL u64 tag: as CHUNK and CHUNKL for a chunk the sender takes the
 *   receiver to hold, which it reads from its store.  A learn that names a
 *   chunk the receiver lacks fails; the receiver then asks for the frame with
 *   DRE_ASK_FULL set in the sequence number, and that learn spells every
 *   chunk out.  A receiver asks in full at once for a frame that named a
 *   chunk it lacks, and for every frame after a light learn failed.  (Most asks come from links the two stores disagree on, not
 *   from missing chunks: a learn of a frame of references then costs a few
 *   bytes per chunk, not the frame's bytes.)
 * It is not counted in the frame sequence.
 */
#ifndef WANOPT_DRE_PROTO_H
#define WANOPT_DRE_PROTO_H

#define DRE_STREAM_MAGIC "WDRE"
#define DRE_STREAM_VERSION 3     /* what encoders write (3: AGAIN) */
#define DRE_STREAM_VERSION_MIN 1 /* oldest that decoders read */
#define DRE_STREAM_HDR_LEN 14
#define DRE_FRAME_MAGIC 0xD7
#define DRE_FRAME_HDR_MAX (2 + 10 * 4 + 1 + 8)

#define DRE_FRAME_RAW_MAX (16u << 20)  /* decoded bytes per frame */
#define DRE_CHUNK_MAX (256u << 10)     /* largest chunk the format allows */
#define DRE_DELTA_WIN (128u << 10)     /* base window of a delta */
#define DRE_DELTA_INS_MAX 4096         /* instructions per delta */
#define DRE_LEARN_BACKLOG (64u << 20)  /* encoded bytes a decoder holds while waiting */

enum dre_proto_frame {
	DRE_FT_DATA = 1,
	DRE_FT_LEARN = 2,
	DRE_FT_END = 3,  /* the sender's data ended: all sizes 0, sum 0; once every frame
			    before it is applied the receiver may pass the end on, while
			    the stream stays open for asks until the sender closes it */
};

enum dre_proto_lz {
	DRE_PLZ_NONE = 0,
	DRE_PLZ_LZ4 = 1,
	DRE_PLZ_ZSTD = 2,
};

enum dre_proto_op {
	DRE_OP_LIT = 1,
	DRE_OP_RAW = 2,
	DRE_OP_REF = 3,
	DRE_OP_RUN = 4,
	DRE_OP_SKIP = 5,
	DRE_OP_DELTA = 6,
	DRE_OP_DELTAR = 7,
	DRE_OP_CHUNK = 8,  /* LEARN frames only */
	DRE_OP_CHUNKL = 9, /* LEARN: as CHUNK, and it follows the previous chunk in
			      the sender's store order: the receiver adopts that link */
	DRE_OP_AGAIN = 10, /* stream version 3 */
	DRE_OP_HELD = 11,  /* LEARN, stream version 3 */
	DRE_OP_HELDL = 12, /* LEARN, stream version 3 */
};

#endif
