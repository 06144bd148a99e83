/* A till's sales through tilldb's C ABI: one transaction of 100 sales, a read, a lazy scan
 * that sums them, a rollback that leaves nothing behind, a new price list of 200,000 products
 * in one transaction (larger than one log record: committed in parts, all or nothing), the
 * till's safe (a database encrypted at rest, in DIR-safe), and an error with its message.
 *
 * Build (scripts/test does this, through crates/tilldb-c/tests/c_example.rs):
 *   cargo build -p tilldb-c
 *   cc -I crates/tilldb-c/include examples/c/sales.c target/debug/libtilldb_c.a \
 *      -lpthread -ldl -lm -o sales
 *   ./sales ./sales-db
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tilldb.h"

#define CHECK(call)                                                              \
  do {                                                                           \
    tilldb_status status_ = (call);                                              \
    if (status_ != TILLDB_OK) {                                                  \
      fprintf(stderr, "%s failed (%d): %s\n", #call, status_, tilldb_last_error()); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

/* Zeroes `len` bytes at `buf` in a way the compiler keeps (a plain memset of memory that is
 * never read again may be removed); explicit_bzero or memset_s where the platform has one. */
static void wipe(void *buf, size_t len) {
  volatile uint8_t *p = buf;
  while (len--) *p++ = 0;
}

/* The till's safe: a database encrypted at rest under the application's 32-byte key. A real
 * program reads the key from a key file or a key store (the format `till --key-file` reads),
 * never from its source, and wipes its own copy once the database is open: tilldb keeps what
 * it needs. Without the key, or with another, the database does not open and nothing on disk
 * changes. */
static int open_the_safe(const char *dir) {
  uint8_t key[TILLDB_KEY_BYTES];
  for (size_t i = 0; i < sizeof key; i++) key[i] = (uint8_t)(i * 37 + 11);
  tilldb_db *safe = NULL;
  CHECK(tilldb_open_encrypted(dir, key, sizeof key, 0, &safe));
  tilldb_txn *txn = NULL;
  CHECK(tilldb_begin(safe, &txn));
  CHECK(tilldb_put(txn, NULL, (const uint8_t *)"float", 5, (const uint8_t *)"200.00", 6));
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  CHECK(tilldb_close(safe));

  tilldb_db *refused = NULL;
  if (tilldb_open(dir, 0, &refused) != TILLDB_ERR_KEY_REQUIRED) {
    fprintf(stderr, "the safe opened without its key\n");
    return 1;
  }
  CHECK(tilldb_open_encrypted(dir, key, sizeof key, 0, &safe));
  wipe(key, sizeof key);
  uint8_t *value = NULL;
  size_t value_len = 0;
  CHECK(tilldb_get(safe, NULL, (const uint8_t *)"float", 5, &value, &value_len));
  int float_ok = value_len == 6 && memcmp(value, "200.00", 6) == 0;
  tilldb_free(value, value_len);
  CHECK(tilldb_close(safe));
  if (!float_ok) {
    fprintf(stderr, "the safe holds the wrong float\n");
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  tilldb_db *db = NULL;
  CHECK(tilldb_open(argv[1], 0, &db));

  tilldb_txn *txn = NULL;
  CHECK(tilldb_begin(db, &txn));
  long expected = 0;
  for (int i = 1; i <= 100; i++) {
    char key[16], value[16];
    int key_len = snprintf(key, sizeof key, "sale-%04d", i);
    int value_len = snprintf(value, sizeof value, "%d", i * 25);
    expected += i * 25;
    CHECK(tilldb_put(txn, "sales", (const uint8_t *)key, (size_t)key_len,
                     (const uint8_t *)value, (size_t)value_len));
  }
  CHECK(tilldb_commit(txn, TILLDB_SYNC));

  uint8_t *value = NULL;
  size_t value_len = 0;
  CHECK(tilldb_get(db, "sales", (const uint8_t *)"sale-0042", 9, &value, &value_len));
  if (value_len != 4 || memcmp(value, "1050", 4) != 0) {
    fprintf(stderr, "sale-0042 holds the wrong value\n");
    return 1;
  }
  tilldb_free(value, value_len);
  if (tilldb_get(db, "sales", (const uint8_t *)"sale-9999", 9, &value, &value_len) !=
      TILLDB_NOT_FOUND) {
    fprintf(stderr, "a missing sale was found\n");
    return 1;
  }

  /* A rolled-back transaction leaves nothing. */
  CHECK(tilldb_begin(db, &txn));
  CHECK(tilldb_put(txn, "sales", (const uint8_t *)"sale-0000", 9, (const uint8_t *)"1", 1));
  CHECK(tilldb_rollback(txn));

  /* A table dropped: gone for new readers, its pages back on the free list. */
  CHECK(tilldb_begin(db, &txn));
  CHECK(tilldb_put(txn, "drafts", (const uint8_t *)"d-1", 3, (const uint8_t *)"x", 1));
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  int existed = 0;
  CHECK(tilldb_begin(db, &txn));
  CHECK(tilldb_drop_table(txn, "drafts", &existed));
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  if (!existed ||
      tilldb_get(db, "drafts", (const uint8_t *)"d-1", 3, &value, &value_len) != TILLDB_NOT_FOUND) {
    fprintf(stderr, "the dropped table is still there\n");
    return 1;
  }
  CHECK(tilldb_begin(db, &txn));
  if (tilldb_drop_table(txn, NULL, NULL) != TILLDB_ERR_INVALID) {
    fprintf(stderr, "dropping the default table was not refused\n");
    return 1;
  }
  CHECK(tilldb_rollback(txn));

  /* The lazy scan, backward: the sum and the order. */
  tilldb_iter *it = NULL;
  CHECK(tilldb_scan(db, "sales", NULL, 0, NULL, 0, 1, &it));
  long sum = 0;
  int count = 0;
  const uint8_t *k, *v;
  size_t kl, vl;
  tilldb_status status;
  while ((status = tilldb_iter_next(it, &k, &kl, &v, &vl)) == TILLDB_OK) {
    char number[32] = {0};
    memcpy(number, v, vl < sizeof number - 1 ? vl : sizeof number - 1);
    sum += atol(number);
    if (count == 0 && (kl != 9 || memcmp(k, "sale-0100", 9) != 0)) {
      fprintf(stderr, "a backward scan did not start at the last sale\n");
      return 1;
    }
    count++;
  }
  if (status != TILLDB_NOT_FOUND) {
    fprintf(stderr, "the scan failed: %s\n", tilldb_last_error());
    return 1;
  }
  /* Closing with an iterator open is refused, with a message. */
  if (tilldb_close(db) != TILLDB_ERR_INVALID || strstr(tilldb_last_error(), "still open") == NULL) {
    fprintf(stderr, "close with an open iterator was not refused\n");
    return 1;
  }
  tilldb_iter_free(it);
  if (count != 100 || sum != expected) {
    fprintf(stderr, "scan saw %d sales summing to %ld, expected 100 and %ld\n", count, sum, expected);
    return 1;
  }

  /* A new price list, all or nothing: 200,000 products of 400 bytes in one transaction, about
   * 90 MB of log, more than one record holds (tilldb commits it in parts). */
  CHECK(tilldb_begin(db, &txn));
  static uint8_t price[400];
  for (int i = 0; i < 200000; i++) {
    char key[32];
    int key_len = snprintf(key, sizeof key, "product-%07d", (i * 7919) % 200000);
    memset(price, 'a' + i % 26, sizeof price);
    CHECK(tilldb_put(txn, "prices", (const uint8_t *)key, (size_t)key_len, price, sizeof price));
  }
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  CHECK(tilldb_scan(db, "prices", NULL, 0, NULL, 0, 0, &it));
  int products = 0;
  while ((status = tilldb_iter_next(it, &k, &kl, &v, &vl)) == TILLDB_OK) {
    products++;
  }
  tilldb_iter_free(it);
  if (status != TILLDB_NOT_FOUND || products != 200000) {
    fprintf(stderr, "the price list holds %d products, not 200000\n", products);
    return 1;
  }
  /* The length is a count kept with the table: no scan. */
  uint64_t rows = 0;
  CHECK(tilldb_len(db, "prices", &rows));
  if (rows != 200000) {
    fprintf(stderr, "tilldb_len says %llu products, not 200000\n", (unsigned long long)rows);
    return 1;
  }

  /* A queue in a write transaction: the receipts waiting to print, taken from the head (the
     oldest first), one descent a pop however long the queue. */
  CHECK(tilldb_begin(db, &txn));
  for (int i = 0; i < 5; i++) {
    char key[32];
    int key_len = snprintf(key, sizeof key, "receipt-%03d", i);
    CHECK(tilldb_put(txn, "to_print", (const uint8_t *)key, (size_t)key_len,
                     (const uint8_t *)"r", 1));
  }
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  CHECK(tilldb_begin(db, &txn));
  uint8_t *qk = NULL, *qv = NULL;
  size_t qkl = 0, qvl = 0;
  CHECK(tilldb_pop_first(txn, "to_print", &qk, &qkl, &qv, &qvl));
  int head_ok = qkl == 11 && memcmp(qk, "receipt-000", 11) == 0;
  tilldb_free(qk, qkl);
  tilldb_free(qv, qvl);
  CHECK(tilldb_pop_last(txn, "to_print", &qk, &qkl, &qv, &qvl));
  int tail_ok = qkl == 11 && memcmp(qk, "receipt-004", 11) == 0;
  tilldb_free(qk, qkl);
  tilldb_free(qv, qvl);
  int popped = 2;
  while ((status = tilldb_pop_first(txn, "to_print", &qk, &qkl, &qv, &qvl)) == TILLDB_OK) {
    popped++;
    tilldb_free(qk, qkl);
    tilldb_free(qv, qvl);
  }
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  if (!head_ok || !tail_ok || status != TILLDB_NOT_FOUND || popped != 5) {
    fprintf(stderr, "the queue popped wrong: head %d, tail %d, %d popped\n", head_ok, tail_ok,
            popped);
    return 1;
  }

  /* A read-only handle (another process's, a back-office report's) reads while the writer
     is open: the durable commits as of its open, then the newest after tilldb_refresh. */
  tilldb_db *report = NULL;
  CHECK(tilldb_open_read_only(argv[1], &report));
  tilldb_txn *refused = NULL;
  if (tilldb_begin(report, &refused) != TILLDB_ERR_INVALID) {
    fprintf(stderr, "a read-only handle began a write transaction\n");
    return 1;
  }
  CHECK(tilldb_begin(db, &txn));
  CHECK(tilldb_put(txn, "prices", (const uint8_t *)"product-new", 11, (const uint8_t *)"1", 1));
  CHECK(tilldb_commit(txn, TILLDB_SYNC));
  uint64_t seen = 0;
  for (int tries = 0; tries < 500 && seen != 200001; tries++) {
    CHECK(tilldb_refresh(report)); /* the writer publishes its durable lsn every few ms */
    CHECK(tilldb_len(report, "prices", &seen));
    if (seen != 200001) usleep(10000);
  }
  if (seen != 200001) {
    fprintf(stderr, "the read-only handle saw %llu products after refresh\n",
            (unsigned long long)seen);
    return 1;
  }
  CHECK(tilldb_close(report));
  CHECK(tilldb_close(db));

  char safe_dir[4096];
  if (snprintf(safe_dir, sizeof safe_dir, "%s-safe", argv[1]) >= (int)sizeof safe_dir) {
    fprintf(stderr, "DIR is too long\n");
    return 2;
  }
  if (open_the_safe(safe_dir) != 0) return 1;

  /* An error names what is wrong. */
  tilldb_db *other = NULL;
  if (tilldb_open("/proc/version", 0, &other) == TILLDB_OK) {
    fprintf(stderr, "a file opened as a database\n");
    return 1;
  }
  printf("ok: 100 sales, total %ld; 200000 prices; error text: %s\n", sum,
         tilldb_last_error());
  return 0;
}
