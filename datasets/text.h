/* Language-model text: Penn Treebank words, character-level text, and the
 * contiguous-stream batch loader.
 *
 * Word level (ptb_load, word_corpus_load), as PyTorch's word_language_model
 * (data.py) does: every line of a file is split on whitespace and "<eos>" is
 * appended at its end (also for an empty line); ids are given in order of first
 * appearance. The vocabulary comes from the TRAINING file only (for PTB: 10000
 * words including "<unk>" and "<eos>"); a validation/test word outside it maps to
 * "<unk>" ("<unk>" is appended to the vocabulary when the training file lacks it).
 * Lines end at "\n", "\r\n" or "\r" (Python's universal newlines); whitespace is
 * ASCII (space, \t \n \v \f \r and \x1c-\x1f, as Python's str.split()).
 *
 * Character level (char_corpus_load): one text file; the vocabulary is the set
 * of distinct bytes of the whole file, sorted by byte value (id = rank); the
 * first floor(n * (1 - valid_frac)) bytes are the training text and the rest the
 * validation text (valid_frac 0.1: the last 10%, as nanoGPT's shakespeare_char).
 *
 * Batching (LmLoader), as word_language_model's batchify/get_batch. Shape
 * letters: B columns (per-worker batch), T window length (BPTT), L tokens per
 * column. The training stream is first cut into W contiguous parts of
 * floor(n/W) tokens and worker w takes part w (SBC section IV-A: "we split the
 * sequences of training symbols each into four subsequences of equal length and
 * assign every client one of these subsequences"). A part is cut into B
 * contiguous columns of L = floor(len/B) tokens (the tail is dropped): column b
 * is part[b*L .. (b+1)*L). Window i (i = 0, T, 2T, ...) has T' = min(T, L-1-i)
 * steps: tokens[t*B + b] = column_b[i + t], target y[t*B + b] = column_b[i+t+1]
 * (time-major, as nn/model.h's Batch). An epoch has ceil((L-1)/T) windows; the
 * last may be shorter than T. The order is fixed (no shuffling); the caller
 * carries the hidden state across windows and resets it at each epoch start. */
#ifndef GC_TEXT_H
#define GC_TEXT_H

#include <stdint.h>

#include "datasets/data.h"

typedef struct {
    int V;
    int is_char;
    /* word level */
    char **words;   /* [V] NUL-terminated */
    int *lens;      /* [V] byte lengths */
    int *table;     /* open-addressing hash table of ids, -1 empty */
    int tcap;       /* power of two */
    int unk, eos;   /* ids of "<unk>" and "<eos>" */
    /* character level */
    uint8_t bytes[256]; /* id -> byte */
    int byte_id[256];   /* byte -> id, -1 if absent */
} Vocab;

typedef struct {
    Vocab vocab;
    int *train, *valid, *test; /* token ids; test is NULL for character text */
    int64_t ntrain, nvalid, ntest;
} TextCorpus;

/* dir/ptb.{train,valid,test}.txt; dir NULL: $DATA_DIR/ptb */
int ptb_load(TextCorpus *c, const char *dir, char *err /* [errlen] */, size_t errlen);
/* Word-level corpus from three files (valid_path / test_path may be NULL) */
int word_corpus_load(TextCorpus *c, const char *train_path, const char *valid_path, const char *test_path,
                     char *err /* [errlen] */, size_t errlen);
/* Character-level corpus; path NULL: $DATA_DIR/shakespeare/input.txt; 0 <= valid_frac < 1 */
int char_corpus_load(TextCorpus *c, const char *path, double valid_frac, char *err /* [errlen] */, size_t errlen);
void text_corpus_free(TextCorpus *c);

/* id of a word (word level, length len) or -1 */
int vocab_find(const Vocab *v, const char *word, int len);

typedef struct {
    int B, T;
    int worker, nworkers;
    int64_t L;               /* tokens per column */
    int *data;               /* [L, B] time-major: data[t*B + b] = column_b[t] */
    int64_t steps_per_epoch; /* windows per epoch */
    int64_t epoch, cursor;   /* cursor: first time index of the next window */
    uint64_t fingerprint;
    char err[DATA_ERR_LEN];
} LmLoader;

/* Loader over stream (n token ids) for worker `worker` of nworkers. Use
 * nworkers = 1 for evaluation streams unless each worker evaluates a part. */
int lm_loader_init(LmLoader *l, const int *stream /* [n] */, int64_t n, int B, int T, int worker, int nworkers,
                   char *err /* [errlen] */, size_t errlen);
/* Next window: returns its length T' (1..T), or 0 at the end of an epoch (the
 * position moves to the start of the next epoch). */
int lm_loader_next(LmLoader *l, int *tokens /* [T, B] */, int *y /* [T, B] */);
LoaderPos lm_loader_get_pos(const LmLoader *l);
/* 0, or -GC_ERR_STATE (other configuration) / -GC_ERR_PARAM with l->err set */
int lm_loader_set_pos(LmLoader *l, const LoaderPos *p);
void lm_loader_free(LmLoader *l);

#endif
