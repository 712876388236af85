/*
 * The converter of `progeny bench indexer`: a small, ordinary (dynamically
 * linked) program in the role antiword plays for an indexer, which runs it
 * once per document. It reads one document, from the file named as its only
 * argument or else from stdin, and writes the document's text to stdout:
 *
 *  - a word is a maximal run of ASCII letters and digits; every other byte
 *    (markup, binary junk, punctuation, white space) separates words;
 *  - words shorter than two bytes are dropped, the others are lowercased;
 *  - words are joined by single spaces into lines of at most 72 bytes (a
 *    longer word stands alone on its line); every line ends with '\n'.
 *
 * The benchmark computes the same text independently and compares checksums,
 * so this program must follow these rules exactly. It exits with 0 when the
 * whole text was written, and with 1 after a message on stderr otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_LIMIT 72

static void fail(const char *what)
{
    fprintf(stderr, "converter: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Reads all of `fd` into a heap buffer; returns it and sets *length. */
static unsigned char *read_all(int fd, size_t *length)
{
    size_t capacity = 16384, used = 0;
    unsigned char *data = malloc(capacity);
    if (data == NULL)
        fail("malloc");
    for (;;) {
        if (used == capacity) {
            capacity *= 2;
            data = realloc(data, capacity);
            if (data == NULL)
                fail("realloc");
        }
        ssize_t got = read(fd, data + used, capacity - used);
        if (got == 0)
            break;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            fail("read");
        }
        used += (size_t)got;
    }
    *length = used;
    return data;
}

/* Writes all of `data`, retrying short writes. */
static void write_all(const unsigned char *data, size_t length)
{
    while (length > 0) {
        ssize_t put = write(1, data, length);
        if (put < 0) {
            if (errno == EINTR)
                continue;
            fail("write");
        }
        data += put;
        length -= (size_t)put;
    }
}

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int main(int argc, char **argv)
{
    int fd = 0;
    if (argc > 2) {
        errno = EINVAL;
        fail("usage: converter [FILE]");
    }
    if (argc == 2) {
        fd = open(argv[1], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            fail(argv[1]);
    }
    size_t length;
    unsigned char *input = read_all(fd, &length);

    /* Output is never longer than the input plus one newline. */
    unsigned char *output = malloc(length + 1);
    if (output == NULL)
        fail("malloc");
    size_t out = 0, line = 0, i = 0;
    while (i < length) {
        if (!is_word_byte(input[i])) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < length && is_word_byte(input[i]))
            i++;
        size_t word = i - start;
        if (word < 2)
            continue;
        if (line > 0 && line + 1 + word > LINE_LIMIT) {
            output[out++] = '\n';
            line = 0;
        }
        if (line > 0) {
            output[out++] = ' ';
            line++;
        }
        for (size_t k = start; k < i; k++) {
            unsigned char c = input[k];
            output[out++] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
        }
        line += word;
    }
    if (line > 0)
        output[out++] = '\n';
    write_all(output, out);
    free(output);
    free(input);
    return 0;
}
