! Mistake: 4 ranks write a shared file of 1 KiB records interleaved
! round-robin (record k of rank r at byte (k*nranks + r) * 1024), each
! with its own independent MPI_FILE_WRITE_AT: thousands of small requests
! from every rank onto the same file blocks.
! Fix: a strided file view (MPI_TYPE_CREATE_RESIZED) and one collective
! MPI_FILE_WRITE_ALL per step, so collective buffering merges the records
! into large contiguous writes.  The file is the same in both modes.
! Usage: mpirun -np 4 prog mistake|fixed   (writes shared.dat)
program independent_small
  use mpi
  implicit none
  integer, parameter :: rec = 1024, per_step = 1024, steps = 8
  character(len=16) :: mode
  character(len=1), allocatable :: buf(:)
  integer :: ierr, rank, nranks, fh, step, k, rectype, strided
  integer(kind=MPI_OFFSET_KIND) :: base, off
  integer(kind=MPI_ADDRESS_KIND) :: lb, extent

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, mode)
  if (mode /= 'mistake' .and. mode /= 'fixed') then
    if (rank == 0) write (*, '(a)') 'usage: prog mistake|fixed'
    call MPI_Finalize(ierr)
    stop 2
  end if
  allocate (buf(rec * per_step))

  call MPI_File_open(MPI_COMM_WORLD, 'shared.dat', ior(MPI_MODE_CREATE, MPI_MODE_WRONLY), &
                     MPI_INFO_NULL, fh, ierr)
  call MPI_Type_contiguous(rec, MPI_BYTE, rectype, ierr)
  lb = 0
  extent = int(rec, MPI_ADDRESS_KIND) * nranks
  call MPI_Type_create_resized(rectype, lb, extent, strided, ierr)
  call MPI_Type_commit(strided, ierr)

  do step = 0, steps - 1
    do k = 0, per_step - 1
      buf(k * rec + 1:(k + 1) * rec) = achar(iachar('a') + mod(rank + k + step, 26))
    end do
    base = int(step, MPI_OFFSET_KIND) * per_step * nranks * rec
    if (mode == 'mistake') then
      do k = 0, per_step - 1
        off = base + (int(k, MPI_OFFSET_KIND) * nranks + rank) * rec
        call MPI_File_write_at(fh, off, buf(k * rec + 1), rec, MPI_BYTE, MPI_STATUS_IGNORE, ierr)
      end do
    else
      call MPI_File_set_view(fh, base + int(rank, MPI_OFFSET_KIND) * rec, MPI_BYTE, &
                             strided, 'native', MPI_INFO_NULL, ierr)
      call MPI_File_write_all(fh, buf, rec * per_step, MPI_BYTE, MPI_STATUS_IGNORE, ierr)
    end if
  end do
  call MPI_Type_free(strided, ierr)
  call MPI_Type_free(rectype, ierr)
  call MPI_File_close(fh, ierr)
  if (rank == 0) write (*, '(a,i0,a,i0,a)') 'wrote ', steps, ' steps of ', per_step, &
                                            ' records per rank'
  call MPI_Finalize(ierr)
end program independent_small
