! MPI-IO from Fortran, for the MPI-IO layer's tests.  Built three ways:
! `use mpi` (default), `use mpi_f08` (-DF08) and mpif.h (-DMPIFH).
!   mpiio_fortran PATH N K   (K a multiple of 4)
! Every rank r of NP, on the shared file PATH (block b of rank r at byte
! (b * NP + r) * K):
!   open with one hint (access_style=write_once), blocks 0..N-1 with N
!   independent MPI_FILE_WRITE_AT of K/4 MPI_INTEGERs, block N-1 read back
!   with MPI_FILE_READ_AT (its own independent write) and checked, block N
!   with one collective MPI_FILE_WRITE_AT_ALL of K MPI_BYTEs, MPI_FILE_SYNC, a view
!   displaced to block N+1, block N+1 with MPI_FILE_WRITE_ALL (individual
!   pointer), N+2 with a split MPI_FILE_WRITE_AT_ALL_BEGIN/END, N+3 with
!   MPI_FILE_IWRITE_AT and MPI_WAIT; close.  Rank 0 prints a checksum of the
!   whole file, read back after a barrier.
program mpiio_fortran
#ifdef F08
  use mpi_f08
  implicit none
  type(MPI_File) :: fh
  type(MPI_Info) :: info
  type(MPI_Request) :: req
#elif defined(MPIFH)
  implicit none
  include 'mpif.h'
  integer :: fh, info, req
#else
  use mpi
  implicit none
  integer :: fh, info, req
#endif
  integer :: ierr, rank, np, n, k, b, i, u
  integer(kind=MPI_OFFSET_KIND) :: off, disp
  character(len=4096) :: path
  character(len=16) :: arg
  integer, allocatable :: ints(:), back(:)
  character(len=1), allocatable :: bytes(:), whole(:)
  integer(8) :: sum

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call get_command_argument(1, path)
  call get_command_argument(2, arg)
  read (arg, *) n
  call get_command_argument(3, arg)
  read (arg, *) k
  allocate (ints(k / 4), back(k / 4), bytes(k))

  call MPI_Info_create(info, ierr)
  call MPI_Info_set(info, 'access_style', 'write_once', ierr)
  call MPI_File_open(MPI_COMM_WORLD, trim(path), ior(MPI_MODE_CREATE, MPI_MODE_RDWR), info, &
                     fh, ierr)
  if (ierr /= MPI_SUCCESS) stop 3
  call MPI_Info_free(info, ierr)

  do b = 0, n - 1
    ints = rank * 1000 + b
    off = (int(b, MPI_OFFSET_KIND) * np + rank) * k
    call MPI_File_write_at(fh, off, ints, k / 4, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  end do
  call MPI_File_read_at(fh, off, back, k / 4, MPI_INTEGER, MPI_STATUS_IGNORE, ierr)
  if (any(back /= ints)) stop 4
  call fill(n)
  off = (int(n, MPI_OFFSET_KIND) * np + rank) * k
  call MPI_File_write_at_all(fh, off, bytes, k, MPI_BYTE, MPI_STATUS_IGNORE, ierr)
  call MPI_File_sync(fh, ierr)

  disp = (int(n + 1, MPI_OFFSET_KIND) * np + rank) * k
  call MPI_File_set_view(fh, disp, MPI_BYTE, MPI_BYTE, 'native', MPI_INFO_NULL, ierr)
  call fill(n + 1)
  call MPI_File_write_all(fh, bytes, k, MPI_BYTE, MPI_STATUS_IGNORE, ierr)
  call fill(n + 2)
  off = int(np, MPI_OFFSET_KIND) * k
  call MPI_File_write_at_all_begin(fh, off, bytes, k, MPI_BYTE, ierr)
  call MPI_File_write_at_all_end(fh, bytes, MPI_STATUS_IGNORE, ierr)
  call fill(n + 3)
  off = 2 * int(np, MPI_OFFSET_KIND) * k
  call MPI_File_iwrite_at(fh, off, bytes, k, MPI_BYTE, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_File_close(fh, ierr)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    allocate (whole((n + 4) * np * k))
    open (newunit=u, file=trim(path), access='stream', form='unformatted', status='old')
    read (u) whole
    close (u)
    sum = 0
    do i = 1, size(whole)
      sum = mod(sum * 31 + iachar(whole(i)), 1000000007_8)
    end do
    write (*, '(a,i0,a,i0)') 'bytes ', size(whole), ' checksum ', sum
  end if
  call MPI_Finalize(ierr)

contains

  subroutine fill(block)
    integer, intent(in) :: block
    bytes = achar(iachar('A') + mod(rank * 7 + block, 26))
  end subroutine fill
end program mpiio_fortran
