/* The leak report runs at exit while other threads still allocate: one
 * keeps copying a table of 1,000 blocks into a fresh block and freeing the
 * old one (a vector grown, a rehash), one pushes nodes onto a global list,
 * one fills a static array with new blocks. Every block they made stays
 * reachable; only the 300-byte victim is lost. Before the report closed its
 * gate to other threads' calls, the table's 1,000 blocks or tens of
 * thousands of the list's nodes read as lost in most runs. */
#include "fault.h"

#include <pthread.h>
#include <unistd.h>

#define TABLE 1000
#define ARRAY 200000

static void **volatile table;

struct node {
    struct node *next;
    char payload[24];
};
static struct node *volatile list;

static void *volatile array[ARRAY];

static void *copy_table(void *arg)
{
    (void)arg;
    for (;;) {
        void **fresh = malloc(TABLE * sizeof *fresh);
        memcpy(fresh, table, TABLE * sizeof *fresh);
        void **old = table;
        table = fresh;
        free(old);
    }
    return NULL;
}

static void *push_nodes(void *arg)
{
    (void)arg;
    for (;;) {
        struct node *n = malloc(sizeof *n);
        n->next = list;
        list = n;
    }
    return NULL;
}

static void *fill_array(void *arg)
{
    (void)arg;
    for (size_t i = 0;; i = (i + 1) % ARRAY) {
        if (array[i] == NULL)
            array[i] = malloc(32);
    }
    return NULL;
}

int main(void)
{
    void **t = malloc(TABLE * sizeof *t);
    for (int i = 0; i < TABLE; i++)
        t[i] = malloc(48);
    table = t;
    t = NULL;
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    void *(*work[])(void *) = {copy_table, push_nodes, fill_array};
    for (int i = 0; i < 3; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, work[i], NULL) != 0)
            return 2;
    }
    usleep(100 * 1000);
    return 0;
}
